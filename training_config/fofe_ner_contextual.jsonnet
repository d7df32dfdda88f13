// fofe_ner with contextual word vectors (training_config/contextual.libsonnet) as a third word
// vocabulary: FOFE codes of the mixed transformer vectors beside those of the two word embeddings;
// everything else as in fofe_ner.jsonnet.
local contextual = import "contextual.libsonnet";

contextual.add(import "fofe_ner.jsonnet")
