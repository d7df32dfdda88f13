// seq2biseq.jsonnet on CoNLL-2000 chunking (accuracy, span F1, concept error rate). See data.libsonnet.
(import "data.libsonnet").on(import "../seq2biseq.jsonnet", "conll2000_chunking")
