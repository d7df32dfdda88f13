// The sequence labeller of Rei, Crichton & Pyysalo (2016), "Attending to Characters in Neural
// Sequence Labeling Models", COLING, https://aclanthology.org/C16-1030 (blog:
// ../shared/papers/char-attention_rei-2016-blog.txt), in its three word representations:
//
//   "words"        a word embedding x only (the blog's "Word-based" column);
//   "concatenate"  [x; m], m = a tanh layer over the final states of a character BiLSTM
//                  (Lample et al. 2016, "Char concat");
//   "gate"         z * x + (1 - z) * m with z = sigmoid(W3 tanh(W1 x + W2 m)) and the cosine loss
//                  sum_t g_t (1 - cos(m_t, x_t)) ("Char attn").
//
// Then a BiLSTM (200 per direction), a 50-d tanh hidden layer and a CRF, as in the blog. The
// character representations come from the `char_gated` TokenEmbedder fed by the
// `word_and_characters` TokenIndexer (word id and characters of each token together).
//
// Deviations, for a CPU budget: 50-d GloVe 6B (lower-cased) instead of 300-d embeddings; 50-d
// character embeddings and a character BiLSTM of 50 per direction; Adam (lr 0.002) with batches of
// 32 sentences instead of the paper's optimiser. The three variants share every other setting.
//
// Batches hold sentences of similar length (the `bucket` batch sampler sorted by tokens, 10% noise,
// shuffled batches; validation batches in length order without noise), so the BiLSTMs over words
// and characters run over little padding; see docs/bilstm_crf.md for overriding batch sizes. The
// word BiLSTM is `fast_lstm` (allennlp's `lstm` on the padded batch, see bilstm_crf.jsonnet).
//
// Data: the chunk column (tag_column 2, BIO in CoNLL-2000) of CoNLL-style column files; the
// configs apply training_config/data.libsonnet (the fixtures, or conll2000_chunking).
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local char_dim = 50;
local char_lstm_dim = 50;
local lstm_dim = 200;
local hidden_dim = 50;

function(representation)
  assert std.member(["words", "concatenate", "gate"], representation) : "representation: words, concatenate or gate";
  local word_embedding = { embedding_dim: word_dim, pretrained_file: glove, trainable: true };
  local embedder =
    if representation == "words" then
      word_embedding { type: "embedding" }
    else {
      type: "char_gated",
      combination: representation,
      word_embedding: word_embedding,
      character_embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
      character_encoder: { type: "lstm", input_size: char_dim, hidden_size: char_lstm_dim, bidirectional: true },
      // The cosine loss belongs to the gated combination only (the blog).
      cosine_loss_weight: if representation == "gate" then 1.0 else 0.0,
    };
  local indexer =
    if representation == "words" then { type: "single_id", lowercase_tokens: true }
    else { type: "word_and_characters", lowercase_tokens: true, min_padding_length: 1 };
  local word_embedder = if representation == "words" then "tokens" else "tokens.word_embedding";
  {
    // What training_config/data.libsonnet needs on a real data set (hidden).
    on_real_data:: {
      task: "chunking",
      glove: ["vocabulary.pretrained_files.tokens", "model.text_field_embedder.token_embedders." + word_embedder + ".pretrained_file"],
    },
    // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
    type: "whole_test_set",
    dataset_reader: {
      type: "conll_columns",
      tag_column: 2,
      file_tag_scheme: "BIO",
      tag_scheme: "BIOUL",
      token_indexers: { tokens: indexer },
    },
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
      type: "bilstm_crf",
      text_field_embedder: { token_embedders: { tokens: embedder } },
      encoder: {
        type: "fast_lstm",
        input_size: if representation == "concatenate" then 2 * word_dim else word_dim,
        hidden_size: lstm_dim,
        bidirectional: true,
      },
      dropout: 0.5,
      head: { tag_scheme: "BIOUL", constrain_crf_decoding: true, hidden_dim: hidden_dim, activation: "tanh" },
    },
    data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"] } },
    validation_data_loader: {
      batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false },
    },
    trainer: {
      optimizer: { type: "adam", lr: 0.002 },
      grad_norm: 5.0,
      num_epochs: 30,
      patience: 7,
      validation_metric: "+f1-measure-overall",
      // Python's full garbage collections skip the loaded data sets;
      // distributed training leaves its process group when it ends (leave_process_group, last).
      callbacks: [{ type: "freeze_loaded_data" }, { type: "leave_process_group" }],
    },
  }
