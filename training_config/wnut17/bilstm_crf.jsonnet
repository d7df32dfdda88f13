// bilstm_crf.jsonnet on wnut17 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf.jsonnet").fixture_config, "wnut17")
