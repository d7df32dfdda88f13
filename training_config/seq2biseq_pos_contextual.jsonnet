// seq2biseq (POS) with contextual word vectors (training_config/contextual.libsonnet) beside the
// word and character vectors; everything else as in seq2biseq_pos.jsonnet.
// Data: the fixtures (default, the POS column), conll2000_pos or ewt_upos (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";
local data = import "data.libsonnet";

data.on(contextual.add((import "seq2biseq_pos.jsonnet").fixture_config) + {
  model+: { encoder+: { input_size+: contextual.dim } },
})
