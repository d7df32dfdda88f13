// Seq2Biseq for POS tagging (§4, WSJ in the paper): seq2biseq.jsonnet with the POS column as plain
// labels (no tag scheme: accuracy only), batches bucketed by length as there. Trains on the
// CoNLL-2003 fixtures' POS column by default.
// CoNLL-2000's POS column (Brill-tagger tags; no dev set, every 9th training sentence held out):
//   -o '{"train_data_path": "../shared/data/conll2000/train.txt?without_held_out=9",
//        "validation_data_path": "../shared/data/conll2000/train.txt?held_out=9",
//        "test_data_path": "../shared/data/conll2000/test.txt", ...GloVe...}'
// UD English-EWT UPOS: replace both readers with
//   {"type": "conllu_ner", "tag_source": "upos", "token_indexers": <the same>}
// and read ../shared/data/ud_english_ewt/r2.16/en_ewt-ud-{train,dev,test}.conllu, as
// benchmarks/seq2biseq_benchmark.py does. The baseline is bilstm_crf_pos.jsonnet.
local base = import "seq2biseq.jsonnet";
local pos_reader = base.dataset_reader + { tag_column: 1, file_tag_scheme: null };

base + {
  dataset_reader: pos_reader,
  validation_dataset_reader: pos_reader,
  model+: { tag_scheme: null },
}
