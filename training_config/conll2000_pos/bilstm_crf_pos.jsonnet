// bilstm_crf_pos.jsonnet on conll2000_pos (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf_pos.jsonnet").fixture_config, "conll2000_pos")
