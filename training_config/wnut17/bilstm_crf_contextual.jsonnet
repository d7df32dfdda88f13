// bilstm_crf_contextual.jsonnet on wnut17 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf_contextual.jsonnet").fixture_config, "wnut17")
