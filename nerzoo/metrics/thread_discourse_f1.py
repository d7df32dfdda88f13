from typing import Dict, Hashable, Sequence, Set

import torch
from allennlp.nn.util import dist_reduce_sum
from allennlp.training.metrics.metric import Metric

from nerzoo.metrics.span_set_f1 import ratio

# Rows of the count tensor, and the prefixes of the metric names.
TASKS = ("link", "da", "joint")


@Metric.register("thread_discourse_f1")
class ThreadDiscourseF1(Metric):
    """
    Post-level micro-averaged precision, recall and F1 of forum thread discourse structure
    prediction, for links, dialogue acts (DAs) and both jointly: the evaluation of Liu, Baldwin &
    Cohn (2017), "Capturing Long-range Contextual Dependencies with Memory-enhanced Conditional
    Random Fields", IJCNLP, https://aclanthology.org/I17-1056, §4.3 and Table 1 ("Following Wang
    (2014), we evaluate based on post-level micro-averaged F-score"), on the CNET threads of Kim,
    Wang & Baldwin (2010), where a post may link to several earlier posts, each link with its own
    DA.

    Registered as a `Metric` with name "thread_discourse_f1".

    The paper gives no more detail; this is the definition used here.  Each post makes one
    prediction, a link `l` (0 = the thread's virtual head) and a DA `d`, as ME-CRF does (§4.2);
    its gold annotation is its set of `(link, DA)` pairs.  For every post:

    - Link: true positive iff `l` is one of the post's gold links; recall over all gold links.
    - DA: true positive iff `d` is among the post's gold DAs, taken as a set; recall over those sets.
    - Joint: true positive iff `(l, d)` is one of the post's gold pairs; recall over gold links.

    Precision is over the predictions (one per post).  Counts are summed over all posts of all
    threads (and over distributed workers) before precision and recall are taken; a ratio with a
    zero denominator is 0.  On data without multi-headed posts P = R = F1 = accuracy.

    Keys: `link_precision`, `link_recall`, `link_f1`, and the same for `da_` and `joint_`.
    """

    def __init__(self) -> None:
        self._counts = torch.zeros(len(TASKS), 3, dtype=torch.long)

    def __call__(  # type: ignore
        self,
        predicted_links: Sequence[Sequence[int]],
        predicted_dialogue_acts: Sequence[Sequence[Hashable]],
        gold_links: Sequence[Sequence[Sequence[int]]],
        gold_dialogue_acts: Sequence[Sequence[Sequence[Hashable]]],
    ) -> None:
        """
        # Parameters

        predicted_links : `Sequence[Sequence[int]]`
            Per thread, the predicted link of each post (0 = head).
        predicted_dialogue_acts : `Sequence[Sequence[Hashable]]`
            Per thread, the predicted DA of each post (label strings, or ids used consistently).
        gold_links : `Sequence[Sequence[Sequence[int]]]`
            Per thread, per post, all its gold links (the reader's metadata `gold_links`).
        gold_dialogue_acts : `Sequence[Sequence[Sequence[Hashable]]]`
            Per thread, per post, the DA of each of those links (`gold_dialogue_acts`).
        """
        if not len(predicted_links) == len(predicted_dialogue_acts) == len(gold_links) == len(gold_dialogue_acts):
            raise ValueError(
                f"numbers of threads differ: {len(predicted_links)} predicted links, "
                f"{len(predicted_dialogue_acts)} predicted DAs, {len(gold_links)} gold links, "
                f"{len(gold_dialogue_acts)} gold DAs"
            )
        # Rows: link, DA, joint; columns: true positives, predictions, gold items.
        batch_counts = [[0, 0, 0] for _ in TASKS]
        for thread, (links, acts, all_gold_links, all_gold_acts) in enumerate(
            zip(predicted_links, predicted_dialogue_acts, gold_links, gold_dialogue_acts)
        ):
            if not len(links) == len(acts) == len(all_gold_links) == len(all_gold_acts):
                raise ValueError(
                    f"thread {thread}: numbers of posts differ: {len(links)} predicted links, "
                    f"{len(acts)} predicted DAs, {len(all_gold_links)} gold, {len(all_gold_acts)} gold DAs"
                )
            for link, act, post_links, post_acts in zip(links, acts, all_gold_links, all_gold_acts):
                if len(post_links) != len(post_acts):
                    raise ValueError(
                        f"thread {thread}: a post has {len(post_links)} gold links but {len(post_acts)} gold DAs"
                    )
                gold_pairs: Set = {(int(gold), gold_act) for gold, gold_act in zip(post_links, post_acts)}
                gold_links_acts = (
                    {gold for gold, _ in gold_pairs},
                    {gold_act for _, gold_act in gold_pairs},
                    gold_pairs,
                )
                for row, (prediction, gold) in enumerate(zip((int(link), act, (int(link), act)), gold_links_acts)):
                    batch_counts[row][0] += prediction in gold
                    batch_counts[row][1] += 1
                    batch_counts[row][2] += len(gold)
        self._counts += torch.tensor(batch_counts, dtype=torch.long)

    @property
    def counts(self) -> Dict[str, Dict[str, int]]:
        """This worker's raw counts: `{task: {"tp": .., "predicted": .., "gold": ..}}`."""
        return {
            task: dict(zip(("tp", "predicted", "gold"), self._counts[row].tolist())) for row, task in enumerate(TASKS)
        }

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        counts = dist_reduce_sum(self._counts).cpu()
        metrics: Dict[str, float] = {}
        for row, task in enumerate(TASKS):
            true_positives, predicted, gold = (int(value) for value in counts[row])
            metrics[f"{task}_precision"] = precision = ratio(true_positives, predicted)
            metrics[f"{task}_recall"] = recall = ratio(true_positives, gold)
            metrics[f"{task}_f1"] = ratio(2 * precision * recall, precision + recall)
        if reset:
            self.reset()
        return metrics

    def reset(self) -> None:
        self._counts.zero_()
