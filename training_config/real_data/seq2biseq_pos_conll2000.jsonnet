// seq2biseq_pos.jsonnet on the POS column of CoNLL-2000. See data.libsonnet.
(import "data.libsonnet").on(import "../seq2biseq_pos.jsonnet", "conll2000_pos")
