// deptree_ner.jsonnet on conll2003 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../deptree_ner.jsonnet").fixture_config, "conll2003")
