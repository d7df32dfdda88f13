// deptree_ner with contextual word vectors (training_config/contextual.libsonnet), as the paper
// uses ELMo (§3.1): concatenated with the word and character vectors, before the POS and
// dependency-relation embeddings; everything else as in deptree_ner.jsonnet.
// Data: the fixtures (default), conll2003, wnut17 (spaCy trees) or uner_ewt (gold UD trees)
// (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";
local data = import "data.libsonnet";

data.on(contextual.add((import "deptree_ner.jsonnet").fixture_config) + {
  model+: {
    semantic_encoder+: {
      layers: [super.layers[0] { input_size+: contextual.dim }] + super.layers[1:],
    },
  },
})
