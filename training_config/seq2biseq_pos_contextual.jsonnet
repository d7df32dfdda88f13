// seq2biseq (POS) with contextual word vectors (training_config/contextual.libsonnet) beside the
// word and character vectors; everything else as in seq2biseq_pos.jsonnet.
local contextual = import "contextual.libsonnet";

contextual.add(import "seq2biseq_pos.jsonnet") + {
  model+: { encoder+: { input_size+: contextual.dim } },
}
