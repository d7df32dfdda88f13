// bilstm_crf_gpu.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../bilstm_crf_gpu.jsonnet").fixture_config, "conll2003")
