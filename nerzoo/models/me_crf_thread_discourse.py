from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError, check_dimensions_match
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models.model import Model
from allennlp.modules import FeedForward, Seq2VecEncoder, TextFieldEmbedder
from allennlp.nn import Activation, InitializerApplicator
from allennlp.nn.util import get_text_field_mask
from allennlp.training.metrics import Average

from nerzoo.metrics.thread_discourse_f1 import ThreadDiscourseF1
from nerzoo.models.head_tagger import HeadTagger
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.modules.seq2seq_encoders.memory_hop import MemoryHopEncoder


@Model.register("me_crf_thread_discourse")
@Model.register("me_crf_threads")  # the earlier name: archives trained under it still load
class MeCrfThreadDiscourse(HeadTagger):
    """
    ME-CRF for forum thread discourse structure: Liu, Baldwin & Cohn (2017), "Capturing Long-range
    Contextual Dependencies with Memory-enhanced Conditional Random Fields", IJCNLP,
    https://aclanthology.org/I17-1056, §4 (the model of §3 applied to threads, §4.2).  For every
    post `t` of a thread it predicts the earlier post it responds to (its link: 0 = the virtual
    head, or `1 .. t-1`) and the dialogue act (DA) of that link, in one network:

        x_t   = [Phi_title(title_t) ; Phi_text(text_t)]                          (§4.2)
        Phi(w) = tanh(W [GRU_fwd(w)_last ; GRU_bwd(w)_first] + b)                (like eq. 3)
        x'_t  = [x_t ; W_s Phi_s(x_t) ; W_p Phi_p(x_t)]                          (§4.2)
        m_t   = c_t = tanh(W_m BiGRU(x')_t + b_m),  m_0 = c_0 = 0                 (eq. 1-3, tied)
        p^k_t = softmax over i in {0 .. t-1} of (u^k_t . m_i),   u^1_t = m_t       (eq. 4)
        u^{k+1}_t = sum_i p^k_{t,i} c_i + u^k_t                                  (eq. 5-6)
        DA_t  = CRF(W u^{K+1}_t)  (Viterbi), or softmax(W_DA u^{K+1}_t) (MEMNET, eq. 13)
        link_t = argmax_i p^k_{t,i}  for the supervised hop k = `link_hop`

    `Phi_s` are the two structural features (initiator, relative position) and `Phi_p` the three
    punctuation features (numbers of "?", "!" and URLs) of the `thread_discourse` reader; `W_s` and
    `W_p` are linear maps without bias (50 x 2 and 100 x 3 in the paper).  `Phi_title` and
    `Phi_text` are any `Seq2VecEncoder`s over the shared word embeddings, with separate parameters
    (a bidirectional `gru` in the shipped config, whose output is exactly [last forward state;
    first backward state]), each followed by its own tanh projection to `post_dim`.

    The memory is a `MemoryHopEncoder` built with `null_memory = True` (`m_0 = 0`, the link target 0),
    `causal = True` and `include_self = False`: post `t` attends over `{m_0, m_1 .. m_{t-1}}`, "the t
    posts in the memory" of eq. 11, exactly its possible link targets (eq. 4 for tagging includes
    `m_t`; a post never links to itself).  The paper ties the memories (`m = c`) and uses one hop.

    Training minimises (eq. 11-12)

        L' = alpha L_DA + (1 - alpha) L_LNK,
        L_LNK = sum over the real posts t of the batch of  -log p^k_{t, l_t},

    where `L_DA` is the head's loss (the negative CRF log-likelihood summed over the threads of the
    batch, eq. 9, or MEMNET's summed cross-entropy) and `l_t` is the post's most recent link (the
    reader's `links`; "we only include the most recent linked post during training", §4.2).  A
    probability that underflows to 0 is clamped to the smallest positive float, so the loss stays
    finite.  Evaluation is against all gold links and DAs of every post (`ThreadDiscourseF1`).

    Registered as a `Model` with name "me_crf_thread_discourse".

    # Parameters

    vocab : `Vocabulary`, required
    text_field_embedder : `TextFieldEmbedder`, required
        Word embeddings shared by titles and texts (size 20 in the paper); embeds
        `(batch_size, num_posts, num_words)` to `(batch_size, num_posts, num_words, embedding_dim)`.
    title_encoder : `Seq2VecEncoder`, required
        `Phi_title` before its projection: `(num_posts, num_words, embedding_dim)` to
        `(num_posts, title_encoder_dim)`.
    text_encoder : `Seq2VecEncoder`, required
        `Phi_text`, likewise, with its own parameters.
    memory : `Lazy[MemoryHopEncoder]`, required
        Built with `input_dim = 2 * post_dim + structural_dim + punctuation_dim`; give
        `hidden_dim` (50), `tie_memories: true`, `null_memory: true`, `include_self: false`,
        `dropout`.
    head : `Lazy[TagHead]`, optional (default = `TagHead` with plain labels)
        Built with `input_dim` = the memory's output size and `tag_scheme = None` (DAs are plain
        labels); `use_crf: false` gives the MEMNET baseline (eq. 13).
    post_dim : `int`, optional (default = `20`)
        Size of each of `Phi_title` and `Phi_text` after the tanh projection.
    structural_dim : `int`, optional (default = `50`)
        Rows of `W_s`.
    punctuation_dim : `int`, optional (default = `100`)
        Rows of `W_p`.
    alpha : `float`, optional (default = `0.5`)
        The weight of `L_DA` in eq. 12, in `[0, 1]`.
    link_hop : `int`, optional (default = `-1`)
        Which hop's attention is supervised by `L_LNK` and read for link prediction (Python
        indexing: -1 = the last hop).
    dropout : `float`, optional (default = `0.0`)
        Dropout on the word embeddings (the input of the title and text GRUs) and on those
        encoders' outputs; the memory GRUs take their own `dropout`.
    initializer : `InitializerApplicator`, optional
    """

    default_predictor = "thread_discourse"

    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        title_encoder: Seq2VecEncoder,
        text_encoder: Seq2VecEncoder,
        memory: Lazy[MemoryHopEncoder],
        head: Lazy[TagHead] = Lazy(TagHead),
        post_dim: int = 20,
        structural_dim: int = 50,
        punctuation_dim: int = 100,
        alpha: float = 0.5,
        link_hop: int = -1,
        dropout: float = 0.0,
        initializer: InitializerApplicator = InitializerApplicator(),
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        if not 0.0 <= alpha <= 1.0:
            raise ConfigurationError(f"me_crf_thread_discourse needs 0 <= alpha <= 1, got {alpha}")
        sizes = (("post_dim", post_dim), ("structural_dim", structural_dim), ("punctuation_dim", punctuation_dim))
        for name, value in sizes:
            if value <= 0:
                raise ConfigurationError(f"me_crf_thread_discourse needs {name} > 0, got {value}")
        for name, encoder in (("title_encoder", title_encoder), ("text_encoder", text_encoder)):
            check_dimensions_match(
                text_field_embedder.get_output_dim(),
                encoder.get_input_dim(),
                "text field embedding dim",
                f"{name} input dim",
            )
        self.text_field_embedder = text_field_embedder
        self.title_encoder = title_encoder
        self.text_encoder = text_encoder
        self.title_projection = FeedForward(title_encoder.get_output_dim(), 1, post_dim, Activation.by_name("tanh")())
        self.text_projection = FeedForward(text_encoder.get_output_dim(), 1, post_dim, Activation.by_name("tanh")())
        # W_s in R^{structural_dim x 2} and W_p in R^{punctuation_dim x 3}.
        self.structural_projection = torch.nn.Linear(2, structural_dim, bias=False)
        self.punctuation_projection = torch.nn.Linear(3, punctuation_dim, bias=False)
        self.dropout = torch.nn.Dropout(dropout)

        self.memory = memory.construct(input_dim=2 * post_dim + structural_dim + punctuation_dim)
        rules = (
            ("null_memory must be true (m_0 is the link target 0, the thread head)", not self.memory.null_memory),
            ("causal must be true (a post links to earlier posts only)", not self.memory.causal),
            ("include_self must be false (a post never links to itself)", self.memory.include_self),
        )
        problems = [wrong for wrong, bad in rules if bad]
        if problems:
            raise ConfigurationError("me_crf_thread_discourse memory: " + "; ".join(problems))
        if not -self.memory.num_hops <= link_hop < self.memory.num_hops:
            raise ConfigurationError(
                f"link_hop {link_hop} is out of range for a memory of {self.memory.num_hops} hop(s)"
            )
        self.link_hop = link_hop
        self.alpha = alpha

        self.head = head.construct(vocab=vocab, input_dim=self.memory.get_output_dim(), tag_scheme=None)
        if self.head.tag_scheme is not None:
            raise ConfigurationError(
                f"dialogue acts are plain labels: leave the head's tag_scheme out (got {self.head.tag_scheme!r})"
            )
        self.discourse_f1 = ThreadDiscourseF1()
        self.da_loss_mean = Average()
        self.link_loss_mean = Average()
        initializer(self)

    def _encode_posts(
        self, texts: TextFieldTensors, encoder: Seq2VecEncoder, projection: FeedForward, post_mask: torch.BoolTensor
    ) -> torch.Tensor:
        """
        `Phi` of every post: `(batch_size, num_posts, num_words)` word ids to `(batch_size,
        num_posts, post_dim)`, zeros for padding posts.  The encoder sees the real posts only,
        flattened to `(num_real_posts, num_words, embedding_dim)`.
        """
        # Shape: (batch_size, num_posts, num_words)
        word_mask = get_text_field_mask(texts, num_wrapping_dims=1)
        # Shape: (batch_size, num_posts, num_words, embedding_dim)
        embedded = self.dropout(self.text_field_embedder(texts, num_wrapping_dims=1))
        # Shape: (num_real_posts, encoder_dim)
        encoded = self.dropout(encoder(embedded[post_mask], word_mask[post_mask]))
        projected = projection(encoded)
        output = projected.new_zeros(*post_mask.shape, projected.size(-1))
        return output.masked_scatter(post_mask.unsqueeze(-1), projected)

    def forward(  # type: ignore
        self,
        titles: TextFieldTensors,
        texts: TextFieldTensors,
        structural_features: torch.Tensor,
        punctuation_features: torch.Tensor,
        tags: Optional[torch.LongTensor] = None,
        links: Optional[torch.LongTensor] = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, Any]:
        """
        # Parameters

        titles, texts : `TextFieldTensors`, from `ListField[TextField]`s: `(batch_size, num_posts,
            num_words)` ids (each with its own `num_words`)
        structural_features : `torch.Tensor`, `(batch_size, num_posts, 2)`
        punctuation_features : `torch.Tensor`, `(batch_size, num_posts, 3)`
        tags : `torch.LongTensor`, optional, `(batch_size, num_posts)`: the DA id of each post's
            most recent link
        links : `torch.LongTensor`, optional, `(batch_size, num_posts)`: that link (0 = head),
            -1 at padding
        metadata : `List[Dict]`, optional; `gold_links` and `gold_dialogue_acts` (all links of every
            post) are evaluated against, `words` and `thread_id` copied to the output

        # Returns

        What `TagHead.forward` returns for the posts (`logits` `(batch_size, num_posts,
        num_tags)`, `mask` `(batch_size, num_posts)`, `tags`: per thread the DA id of each post,
        `sentence_spans`), and

        - `links` : per thread, the predicted link of each post (`0 .. t-1` for post `t`);
        - `link_probabilities` : `(batch_size, num_posts, num_posts + 1)`, the supervised hop's
          attention, column `i` = link target `i` (0 = head), zero for `i >= t`;
        - `memory_attention` `(batch_size, num_hops, num_posts, num_keys)` and
          `memory_key_positions` `(batch_size, num_posts, num_keys)` (-1 for `m_0`), as `me_crf`'s;
        - `words`, `thread_id` with metadata;
        - with `tags` and `links`: `loss` (eq. 12), `da_loss` and `link_loss` (the two terms
          before weighting).
        """
        # Shape: (batch_size, num_posts); every real post has at least one title token.
        post_mask = get_text_field_mask(titles, num_wrapping_dims=1).any(dim=-1)
        # x'_t = [Phi_title; Phi_text; W_s Phi_s; W_p Phi_p]. Shape: (batch_size, num_posts, memory input_dim)
        features = torch.cat(
            [
                self._encode_posts(titles, self.title_encoder, self.title_projection, post_mask),
                self._encode_posts(texts, self.text_encoder, self.text_projection, post_mask),
                self.structural_projection(structural_features),
                self.punctuation_projection(punctuation_features),
            ],
            dim=-1,
        )
        attention = self.memory.attend(features, post_mask)
        batch_size, num_posts = post_mask.shape
        # Column i = link target i (0 = head, i = post i). Shape: (batch_size, num_posts, num_posts + 1)
        link_probabilities = attention.dense_weights()[:, self.link_hop]
        # Post t (row t - 1) may link to 0 .. t - 1. Shape: (num_posts, num_posts + 1)
        candidates = torch.ones(num_posts, num_posts + 1, dtype=torch.bool, device=post_mask.device).tril()
        predicted_links = link_probabilities.masked_fill(~candidates, -1.0).argmax(dim=-1)
        lengths = post_mask.sum(dim=1).tolist()
        link_lists = [row[:length] for row, length in zip(predicted_links.tolist(), lengths)]

        output = self.tag(attention.output, post_mask, tags, metadata)
        output["links"] = link_lists
        output["link_probabilities"] = link_probabilities
        output["memory_attention"] = attention.weights
        output["memory_key_positions"] = attention.key_positions().unsqueeze(0).expand(batch_size, -1, -1)
        if metadata is not None:
            output["thread_id"] = [thread.get("thread_id") for thread in metadata]

        if links is not None and "loss" in output:
            gold_mask = post_mask & (links >= 0)
            # Eq. 11 with the most recent link. Shape: (batch_size, num_posts)
            gold_probabilities = link_probabilities.gather(-1, links.clamp_min(0).unsqueeze(-1)).squeeze(-1)
            tiny = torch.finfo(gold_probabilities.dtype).tiny
            link_loss = -(gold_probabilities.clamp_min(tiny).log() * gold_mask).sum()
            output["da_loss"] = da_loss = output["loss"]
            output["link_loss"] = link_loss
            # Eq. 12.
            output["loss"] = self.alpha * da_loss + (1.0 - self.alpha) * link_loss
            self.da_loss_mean(da_loss.detach())
            self.link_loss_mean(link_loss.detach())

        if tags is not None and links is not None:
            predicted = [row[:length] for row, length in zip(output["paths"].tolist(), lengths)]
            self._update_discourse_f1(predicted, link_lists, tags, links, lengths, metadata)
        return output

    def export_refusal(self) -> Optional[str]:
        """`Exportable`: threads of posts have no exported form yet."""
        return "its threads of posts (title and text encoders, a memory over posts) have no exported form yet"

    def attention_keys(self) -> Tuple[str, ...]:
        return ("memory_attention",)

    def _update_discourse_f1(self, predicted_tags, predicted_links, tags, links, lengths, metadata) -> None:
        labels = self.head.tag_labels()
        predicted_acts = [[labels[tag] for tag in path] for path in predicted_tags]
        if metadata is not None and all("gold_links" in thread for thread in metadata):
            gold_links = [thread["gold_links"] for thread in metadata]
            gold_acts = [thread["gold_dialogue_acts"] for thread in metadata]
        else:
            # No full annotation at hand: the most recent link of each post is all the gold there is.
            gold_links = [[[link] for link in row[:length]] for row, length in zip(links.tolist(), lengths)]
            gold_acts = [[[labels[act]] for act in row[:length]] for row, length in zip(tags.tolist(), lengths)]
        self.discourse_f1(predicted_links, predicted_acts, gold_links, gold_acts)

    def make_output_human_readable(self, output_dict: Dict[str, Any]) -> Dict[str, Any]:
        """
        The head's posteriors (`tag_probabilities` `(batch_size, num_posts, num_tags)`, marginals
        of the CRF or MEMNET's softmax; `tag_confidences`), DA strings in `tags`, and
        `link_probabilities` cut to one list per post over its candidates `0 .. t-1`.
        """
        output_dict = self.head.make_output_human_readable(output_dict)
        probabilities = output_dict["link_probabilities"].detach().cpu().tolist()
        output_dict["link_probabilities"] = [
            [row[:t] for t, row in enumerate(thread[: len(links)], start=1)]
            for thread, links in zip(probabilities, output_dict["links"])
        ]
        return output_dict

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = self.discourse_f1.get_metric(reset)
        metrics.update(self.head.get_metrics(reset))
        metrics["da_loss"] = self.da_loss_mean.get_metric(reset)
        metrics["link_loss"] = self.link_loss_mean.get_metric(reset)
        return metrics
