// bilstm_crf.jsonnet on uner_ewt (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf.jsonnet").fixture_config, "uner_ewt")
