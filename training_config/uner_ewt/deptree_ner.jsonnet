// deptree_ner.jsonnet on uner_ewt (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../deptree_ner.jsonnet").fixture_config, "uner_ewt")
