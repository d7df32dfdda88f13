// Seq2Biseq (Dinarelli & Grobol 2019, "Seq2Biseq: Bidirectional Output-wise Recurrent Neural
// Networks for Sequence Modelling", https://arxiv.org/abs/1904.04733): a character GRU whose summed
// states go through a feed-forward layer (eq. 1, `summed_gru`), a word BiGRU over [word embedding;
// character representation] (eq. 2), a backward label decoder from <EOS> and a forward decoder whose
// output sees both decoders and the words (eq. 5-7), loss 1/2 (log p_fw + log p_bw) + L2 (eq. 8).
// Chunking in the BIO formalism (§4.1), scored by accuracy, span F1 and concept error rate.
//
// Settings of §4.2 for WSJ: label embeddings 150, character embeddings 30, GRU_c 100, the other GRUs
// 150; dropout 0.5 on the embeddings (words, characters, labels) and on the outputs of the word
// BiGRU and both label decoders; L2 1e-4 (`regularizer`, alpha = lambda / 2); Adam as on WSJ (lr
// 0.001: the paper does not give Adam's rate) with the rate decayed linearly to 0 at the end of
// training (allennlp's `linear_with_warmup` without warm-up, stepped every batch; it reads the
// trainer's `num_epochs`, so an override of it keeps the schedule in step); no gradient clipping;
// mini-batches of 100 sentences clustered by length (the bucket sampler: the paper's second
// solution, its choice for WSJ; sorted by tokens, 10% noise, shuffled batches; validation batches
// in length order without noise; with `segment_length` the training segments are sorted the same
// way, and all but a sentence's last have that length). 40 epochs (52 on WSJ), keeping the epoch
// with the best dev accuracy; patience 10. See bilstm_crf.jsonnet for overriding batch sizes.
// GloVe 6B 50d word embeddings: the paper uses no pretrained embeddings, but nerzoo's baselines
// do, and the comparison keeps them equal. The L2 term leaves out the word and character
// embedding tables: the rows of words absent from a batch would get only its gradient, which Adam
// turns into a step of about lr towards 0 at every update, erasing the GloVe vectors of words not
// seen in training within a few hundred steps.
//
// Variants (overrides):
//   two optimisers (Seq2Biseq_2-opt, §4.3):  -o '{"model.backward_loss_weight": 1.0}': the backward
//     decoder also gets its own negative log-likelihood (model.backward_loss_scope). Exact with SGD,
//     e.g. the paper's MEDIA setting '{"trainer.optimizer": {"type": "sgd", "lr": 0.125,
//     "momentum": 0.9}}'; with Adam one optimiser on the restricted sum (see the model's docstring);
//   fixed-length overlapping segments (§4.2):  -o '{"dataset_reader.segment_length": 15}'
//     (validation keeps whole sentences: `validation_dataset_reader` below);
//   no lexical input to the decoders (Seq2Biseq vs Seq2Biseq_le):  -o '{"model.lexical_decoders": false}'.
// POS tagging: seq2biseq_pos.jsonnet. Trains on the CoNLL-2003 fixtures' chunk column by default; for
// CoNLL-2000 see char_gated_tagger.libsonnet (same data overrides).
// Character ids: `fast_characters`, allennlp's `characters` padded faster (see bilstm_crf.jsonnet).
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local char_dim = 30;
local char_gru_dim = 100;
local hidden_dim = 150;

local reader = {
  type: "conll_columns",
  tag_column: 2,
  file_tag_scheme: "BIO",
  tag_scheme: "BIO",
  token_indexers: {
    tokens: { type: "single_id", lowercase_tokens: true },
    token_characters: { type: "fast_characters", min_padding_length: 1 },
  },
};

{
  dataset_reader: reader,
  validation_dataset_reader: reader,
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 60000 },
  },
  model: {
    type: "seq2biseq",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "fast_character_encoding",
          embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
          encoder: { type: "summed_gru", input_dim: char_dim, hidden_dim: char_gru_dim, output_dim: char_gru_dim },
        },
      },
    },
    encoder: { type: "gru", input_size: word_dim + char_gru_dim, hidden_size: hidden_dim, bidirectional: true },
    label_embedding_dim: 150,
    decoder_hidden_dim: hidden_dim,
    tag_scheme: "BIO",
    dropout: 0.5,
    regularizer: {
      regexes: [
        // Every parameter but the word and character embedding tables.
        ["^(?!text_field_embedder\\.(token_embedder_tokens\\.|token_embedder_token_characters\\._embedding\\.))", { type: "l2", alpha: 5e-5 }],
      ],
    },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 100, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 100, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    optimizer: { type: "adam", lr: 0.001 },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_steps: 0 },
    num_epochs: 40,
    patience: 10,
    validation_metric: "+accuracy",
  },
}
