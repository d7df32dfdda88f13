// bilstm_crf_pos.jsonnet on ewt_upos (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf_pos.jsonnet").fixture_config, "ewt_upos")
