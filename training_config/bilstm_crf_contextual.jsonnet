// bilstm_crf with contextual word vectors (training_config/contextual.libsonnet) beside the GloVe
// and character vectors; everything else as in bilstm_crf.jsonnet.
local contextual = import "contextual.libsonnet";

contextual.add(import "bilstm_crf.jsonnet") + {
  model+: { encoder+: { input_size+: contextual.dim } },
}
