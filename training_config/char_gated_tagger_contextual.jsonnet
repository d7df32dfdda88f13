// The char-gated tagger with contextual word vectors (training_config/contextual.libsonnet) beside
// the gated word / character vectors; everything else as in char_gated_tagger.jsonnet.
local contextual = import "contextual.libsonnet";

contextual.add(import "char_gated_tagger.jsonnet") + {
  model+: { encoder+: { input_size+: contextual.dim } },
}
