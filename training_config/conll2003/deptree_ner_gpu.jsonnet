// deptree_ner_gpu.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../deptree_ner_gpu.jsonnet").fixture_config, "conll2003")
