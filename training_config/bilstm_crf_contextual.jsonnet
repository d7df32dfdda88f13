// bilstm_crf with contextual word vectors (training_config/contextual.libsonnet) beside the GloVe
// and character vectors; everything else as in bilstm_crf.jsonnet.
// Data: the fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";
local data = import "data.libsonnet";

data.on(contextual.add((import "bilstm_crf.jsonnet").fixture_config) + {
  model+: { encoder+: { input_size+: contextual.dim } },
})
