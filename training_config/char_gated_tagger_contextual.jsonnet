// The char-gated tagger with contextual word vectors (training_config/contextual.libsonnet) beside
// the gated word / character vectors; everything else as in char_gated_tagger.jsonnet.
// Data: the fixtures (default, the chunk column) or conll2000_chunking (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";
local data = import "data.libsonnet";

data.on(contextual.add((import "char_gated_tagger.jsonnet").fixture_config) + {
  model+: { encoder+: { input_size+: contextual.dim } },
})
