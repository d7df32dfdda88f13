// bilstm_crf.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf.jsonnet").fixture_config, "conll2003")
