// deptree_ner with contextual word vectors (training_config/contextual.libsonnet), as the paper
// uses ELMo (§3.1): concatenated with the word and character vectors, before the POS and
// dependency-relation embeddings; everything else as in deptree_ner.jsonnet.
local contextual = import "contextual.libsonnet";

contextual.add(import "deptree_ner.jsonnet") + {
  model+: {
    semantic_encoder+: {
      layers: [super.layers[0] { input_size+: contextual.dim }] + super.layers[1:],
    },
  },
}
