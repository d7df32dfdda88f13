// Second-pass FOFE-NER (Xu 2017, §5.4): a second fofe_ner whose fragment contexts see the entities
// found by a trained first pass replaced by one type token each (e.g. "<ORG> has also recruited
// Fei-Fei Li , director of the AI lab at <ORG> ."); at inference its probabilities are linearly
// interpolated with the first pass's (λ = `interpolation`, the first pass's weight), then decoded.
// Everything else, the length-bucketed batches included, is fofe_ner.jsonnet's.
//
// The first pass is a model archive trained with fofe_ner.jsonnet, named by the environment
// variable FOFE_FIRST_PASS (allennlp passes the environment to Jsonnet as external variables):
//   allennlp train training_config/fofe_ner.jsonnet -s runs/first --include-package nerzoo
//   FOFE_FIRST_PASS=runs/first/model.tar.gz \
//     allennlp train training_config/fofe_ner_second_pass.jsonnet -s runs/second --include-package nerzoo
// Both passes must see the same data and vocabulary: the vocabulary is read from the first pass's
// archive, and data overrides (-o) given to the first pass must be given here too. The first pass
// is frozen and its weights are saved inside the second pass's archive, but loading that archive
// (evaluate, predict) reads the first pass's archive again, so keep it where it was.
local first_pass_archive = std.extVar("FOFE_FIRST_PASS");
local first_pass_config = import "fofe_ner.jsonnet";

first_pass_config + {
  vocabulary: { type: "from_files", directory: first_pass_archive },
  model+: {
    first_pass: { type: "from_archive", archive_file: first_pass_archive },
    interpolation: 0.5,
  },
}
