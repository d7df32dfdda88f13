// bilstm_crf_contextual.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf_contextual.jsonnet").fixture_config, "conll2003")
