// fofe_ner_second_pass.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../fofe_ner_second_pass.jsonnet").fixture_config, "conll2003")
