// me_crf_conll2003_contextual.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../me_crf_conll2003_contextual.jsonnet").fixture_config, "conll2003")
