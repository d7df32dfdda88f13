import json
from typing import Any, Dict

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import JsonDict, sanitize
from allennlp.data import DatasetReader, Instance
from allennlp.models import Model
from allennlp.predictors.predictor import Predictor

from nerzoo.data.dataset_readers.thread_discourse import ThreadDiscourseReader
from nerzoo.modules.seq2seq_encoders.memory_hop import dense_attention
from nerzoo.predictors.input_lines import LinePredictor

# Keys of a post that hold labels; the predictor drops them, so labelled threads can be predicted.
LABEL_KEYS = ("links", "dialogue_acts")


@Predictor.register("thread_discourse")
class ThreadDiscoursePredictor(LinePredictor):
    """
    Predicts the discourse structure of forum threads with an `me_crf_thread_discourse` model (ME-CRF, Liu,
    Baldwin & Cohn, 2017, https://aclanthology.org/I17-1056, §4): for every post, the earlier post
    it responds to and the dialogue act of that link.

    Registered as a `Predictor` with name "thread_discourse".

    Input: one thread per JSON object, in the `thread_discourse` reader's format (`{"thread_id": ...,
    "posts": [{"title": ..., "text": ..., "author": ..., "initiator": ...}, ...]}`, `links` and
    `dialogue_acts` ignored), checked by the reader: `predict_json` raises `ConfigurationError` on an
    unusable one, `allennlp predict` gives its line `{"error": ..., "line": N}`.

    Output: `thread_id` (`null` when the input has none) and `posts`, one entry per post:

    - `post` : its 1-based number;
    - `title` : its title;
    - `link` : the post it responds to, `0 .. post - 1` (0 = the thread head);
    - `dialogue_act` : the dialogue act of that link (Viterbi, or MEMNET's argmax);
    - `link_probabilities` : the attention over `0 .. post - 1`, index `i` = link target `i`;
    - `dialogue_act_probabilities` : `{dialogue act: probability}`, the CRF's posterior marginals
      (MEMNET: its softmax);
    - with `return_attention`, `memory_attention` : one list per memory hop, the hop's attention
      over `0 .. post - 1` likewise.

    # Parameters

    model : `Model`, required
    dataset_reader : `DatasetReader`, required
        A `thread_discourse` reader.
    return_attention : `bool`, optional (default = `False`)
        Add each post's `memory_attention`.
    """

    def __init__(
        self, model: Model, dataset_reader: DatasetReader, return_attention: bool = False, frozen: bool = True
    ) -> None:
        super().__init__(model, dataset_reader, frozen)
        if not isinstance(dataset_reader, ThreadDiscourseReader):
            raise ConfigurationError(
                f"thread_discourse needs a model trained on forum threads (a thread_discourse reader), "
                f"not {type(dataset_reader).__name__}"
            )
        self.return_attention = return_attention

    def _json_to_instance(self, json_dict: JsonDict) -> Instance:
        if not isinstance(json_dict, dict):
            raise ConfigurationError(f"a thread must be a JSON object with 'posts', got {json.dumps(json_dict)[:200]}")
        thread_id = json_dict.get("thread_id")
        if thread_id is not None and not isinstance(thread_id, str):
            raise ConfigurationError(f"'thread_id' must be a string, got {thread_id!r}")
        posts = json_dict.get("posts")
        if isinstance(posts, list):
            # Labels are not input: drop them (non-objects are left for the reader to reject).
            posts = [
                {key: value for key, value in post.items() if key not in LABEL_KEYS} if isinstance(post, dict) else post
                for post in posts
            ]
        instance = self._dataset_reader.text_to_instance(posts, thread_id)
        # The reader has checked the posts: each is an object with a string title.
        instance["metadata"].metadata["titles"] = [post["title"] for post in posts]  # type: ignore
        self._dataset_reader.apply_token_indexers(instance)
        return instance

    def _format(self, instance: Instance, output: Dict[str, Any]) -> JsonDict:
        metadata = instance["metadata"].metadata  # type: ignore
        titles = metadata.get("titles") or metadata["words"]
        labels = output["tag_probability_labels"]
        if self.return_attention:
            positions = torch.as_tensor(output["memory_key_positions"])
            hops = dense_attention(torch.as_tensor(output["memory_attention"]), positions, null_memory=True)
        posts = []
        for index in range(metadata["num_posts"]):
            entry = {
                "post": index + 1,
                "title": titles[index],
                "link": int(output["links"][index]),
                "dialogue_act": output["tags"][index],
                "link_probabilities": [round(float(value), 6) for value in output["link_probabilities"][index]],
                "dialogue_act_probabilities": {
                    labels[label]: round(float(value), 6)
                    for label, value in enumerate(output["tag_probabilities"][index])
                },
            }
            if self.return_attention:
                # Every hop's weights over the link targets `0 .. index` (column `i` is target `i`, 0 = head).
                entry["memory_attention"] = [
                    [round(float(value), 6) for value in hop[index, : index + 1]] for hop in hops
                ]
            posts.append(entry)
        return sanitize({"thread_id": metadata.get("thread_id"), "posts": posts})
