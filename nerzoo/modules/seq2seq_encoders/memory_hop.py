import math
from typing import NamedTuple, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders.pytorch_seq2seq_wrapper import PytorchSeq2SeqWrapper
from allennlp.modules.seq2seq_encoders.seq2seq_encoder import Seq2SeqEncoder
from allennlp.nn.util import masked_softmax

from nerzoo.modules.seq2seq_encoders.relative_attention import masked_inputs

NULL_POSITION = -1  # key position of the dummy head memory m_0


class MemoryHopOutput(NamedTuple):
    """
    What `MemoryHopEncoder.attend` returns.

    output : `torch.Tensor`, `(batch_size, num_steps, memory_dim)`
        `u^{K+1}`, zeros at padding.
    weights : `torch.Tensor`, `(batch_size, num_hops, num_steps, num_keys)`
        `p^k_{t,i}` of every hop, in band form: column `s` of row `t` is memory position
        `key_positions()[t, s]`.  Weights of keys a step may not see are exactly zero.
    first_key_position : `torch.LongTensor`, `(num_steps,)`
        The memory position of each row's first memory column; the next columns follow it.
    null_memory : `bool`
        Whether column 0 is the dummy head `m_0` (before the memory columns).
    """

    output: torch.Tensor
    weights: torch.Tensor
    first_key_position: torch.LongTensor
    null_memory: bool

    def key_positions(self) -> torch.LongTensor:
        """`(num_steps, num_keys)`: the memory position of each column, `-1` for `m_0`."""
        num_memory_keys = self.weights.size(-1) - self.null_memory
        slots = torch.arange(num_memory_keys, device=self.weights.device)
        positions = self.first_key_position.unsqueeze(1) + slots.unsqueeze(0)
        if self.null_memory:
            positions = torch.cat([positions.new_full((positions.size(0), 1), NULL_POSITION), positions], dim=1)
        return positions

    def dense_weights(self) -> torch.Tensor:
        """
        The weights as a full matrix, `(batch_size, num_hops, num_steps, num_steps)`, column `i` =
        memory position `i`; with a dummy head, `(..., num_steps + 1)` and column 0 is `m_0`, so
        column `i` is post `i` in a thread's 1-based numbering.  `O(num_steps^2)` memory.
        """
        return dense_attention(self.weights, self.key_positions(), self.null_memory)


def dense_attention(weights: torch.Tensor, key_positions: torch.LongTensor, null_memory: bool) -> torch.Tensor:
    """Band-form weights `(..., num_steps, num_keys)` with their memory positions `(num_steps, num_keys)`
    -> `(..., num_steps, num_steps)`, as `MemoryHopOutput.dense_weights`."""
    num_steps = weights.size(-2)
    offset = int(null_memory)
    # Columns outside the sequence (zero weight) go to a spare column 0, dropped after.
    index = key_positions + offset + 1
    index = index.masked_fill((index < 1) | (index > num_steps + offset), 0)
    dense = weights.new_zeros(*weights.shape[:-1], num_steps + offset + 1)
    dense.scatter_add_(-1, index.expand_as(weights), weights)
    return dense[..., 1:]


class _BiGruMemory(torch.nn.Module):
    """Eq. 1-3: `tanh(W_fwd GRU_fwd(x)_t + W_bwd GRU_bwd(x)_t + b)`, dropout on GRU input and output."""

    def __init__(self, input_dim: int, hidden_dim: int, memory_dim: int, dropout: float) -> None:
        super().__init__()
        self.gru = PytorchSeq2SeqWrapper(torch.nn.GRU(input_dim, hidden_dim, batch_first=True, bidirectional=True))
        self.dropout = torch.nn.Dropout(dropout)
        # [W_fwd; W_bwd] as one map of the concatenated directions, with the bias b.
        self.projection = torch.nn.Linear(2 * hidden_dim, memory_dim)

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        states = self.dropout(self.gru(self.dropout(inputs), mask))
        return torch.tanh(self.projection(states))


@Seq2SeqEncoder.register("memory_hop")
class MemoryHopEncoder(Seq2SeqEncoder):
    """
    The memory layer of ME-CRF: Liu, Baldwin and Cohn, "Capturing Long-range Contextual
    Dependencies with Memory-enhanced Conditional Random Fields", IJCNLP 2017,
    https://aclanthology.org/I17-1056, section 3.1.

    Every step `x_t` (a word of a whole document, or a post of a thread) is written to an input
    memory `m` and an output memory `c`, each a bidirectional GRU followed by
    `tanh(W_fwd h_fwd + W_bwd h_bwd + b)` with its own parameters (eq. 1-3; `tie_memories` uses
    `m = c`, as the paper does for threads, §4.2).  The current input is `u^1_t = m_t` (§3.1.2)
    and each hop `k = 1..K` reads

        p^k_{t,i} = softmax_i(u^k_t . m_i)         over i <= t (eq. 4; all i unless `causal`)
        o^k_t     = sum_i p^k_{t,i} c_i            (eq. 5)
        u^{k+1}_t = o^k_t + u^k_t                  (eq. 6)

    and the output is `u^{K+1}`, the CRF's input (§3.2).  All hops read the same memories (the
    paper uses one hop, which leaves this open).  With `null_memory` a dummy head `m_0 = c_0 = 0` is
    visible to every step (§4.2: the first post of a thread links to a virtual head); its score is
    always 0 and it adds nothing to `o`.

    The memory spans the whole input sequence; `window = N` restricts each step to the last `N`
    memory positions (itself included; `|t - i| < N` when not causal), computed block-banded: blocks
    of `N` steps, each attending to its own and the previous (and, not causal, the next) block, so
    scores and weights take `O(T N)` memory for `T` steps, not `O(T^2)`.

    Registered as a `Seq2SeqEncoder` with name "memory_hop".

    # Parameters

    input_dim : `int`, required
        Size of `x_t`, the input `(batch_size, num_steps, input_dim)`.
    hidden_dim : `int`, required
        Size of each GRU direction (50 in the paper).
    memory_dim : `int`, optional (default = `hidden_dim`)
        Size of `m_t`, `c_t` and the output (`W_m` is `memory_dim x hidden_dim` per direction).
    num_hops : `int`, optional (default = `1`)
        `K`.
    tie_memories : `bool`, optional (default = `False`)
        One BiGRU memory for both `m` and `c`.
    causal : `bool`, optional (default = `True`)
        Attend to `i <= t` only, as the paper; `False` attends to the whole sequence.
    include_self : `bool`, optional (default = `True`)
        Whether step `t` may attend to its own memory `m_t` (eq. 4 includes it).
    null_memory : `bool`, optional (default = `False`)
        Add the dummy head `m_0 = 0`.
    window : `int`, optional (default = `None`)
        Attend to the last `window` positions only (see above); `None` attends to all.
    dropout : `float`, optional (default = `0.0`)
        Dropout on the GRUs' inputs and outputs (the paper's keep rate 0.8 is 0.2 here).
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        memory_dim: Optional[int] = None,
        num_hops: int = 1,
        tie_memories: bool = False,
        causal: bool = True,
        include_self: bool = True,
        null_memory: bool = False,
        window: Optional[int] = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        memory_dim = memory_dim or hidden_dim
        sizes = {"input_dim": input_dim, "hidden_dim": hidden_dim, "memory_dim": memory_dim, "num_hops": num_hops}
        for name, value in sizes.items():
            if value <= 0:
                raise ConfigurationError(f"MemoryHopEncoder needs {name} > 0, got {value}.")
        if window is not None and window <= 0:
            raise ConfigurationError(f"MemoryHopEncoder needs window > 0 or None, got {window}.")
        if not 0.0 <= dropout < 1.0:
            raise ConfigurationError(f"MemoryHopEncoder needs 0 <= dropout < 1, got {dropout}.")
        self._input_dim = input_dim
        self._memory_dim = memory_dim
        self.num_hops = num_hops
        self.causal = causal
        self.include_self = include_self
        self.null_memory = null_memory
        self.window = window
        self.input_memory = _BiGruMemory(input_dim, hidden_dim, memory_dim, dropout)
        self.output_memory = None if tie_memories else _BiGruMemory(input_dim, hidden_dim, memory_dim, dropout)

    def get_input_dim(self) -> int:
        return self._input_dim

    def get_output_dim(self) -> int:
        return self._memory_dim

    def is_bidirectional(self) -> bool:
        return False

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        """
        # Parameters

        inputs : `torch.Tensor`, `(batch_size, num_steps, input_dim)`
        mask : `torch.BoolTensor`, optional, `(batch_size, num_steps)`

        # Returns

        `u^{K+1}`, `(batch_size, num_steps, memory_dim)`, zeros at padding.
        """
        return self.attend(inputs, mask).output

    def attend(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> MemoryHopOutput:
        """Like `forward`, but also returns every hop's attention weights (see `MemoryHopOutput`)."""
        inputs, mask, padding = masked_inputs("MemoryHopEncoder", self._input_dim, inputs, mask)
        batch_size, num_steps, _ = inputs.shape

        # Eq. 1-3. Shape: (batch_size, num_steps, memory_dim) each.
        input_memory = self.input_memory(inputs, mask)
        output_memory = input_memory if self.output_memory is None else self.output_memory(inputs, mask)

        block, before, after = self._band(num_steps)
        # Shape: (batch_size, num_blocks, num_keys, memory_dim), num_keys = (before + 1 + after) * block
        keys = _key_blocks(input_memory, block, before, after)
        values = _key_blocks(output_memory, block, before, after)
        num_blocks = keys.size(1)
        key_mask = _key_blocks(mask.unsqueeze(-1), block, before, after).squeeze(-1)
        query_mask = _pad_steps(mask.unsqueeze(-1), num_blocks * block).view(batch_size, num_blocks, block, 1)
        # Which key slots each step of a block sees; the same for every block, since keys beyond
        # either end of the sequence are masked by `key_mask`.
        # Shape: (batch_size, num_blocks, block, num_keys)
        allowed = self._visibility(block, before, after, inputs.device) & key_mask.unsqueeze(2) & query_mask
        if self.null_memory:
            # Column 0: m_0 = c_0 = 0, score 0, visible to every real step.
            allowed = torch.cat([query_mask, allowed], dim=-1)

        # Shape: (batch_size, num_blocks, block, memory_dim)
        query = _pad_steps(input_memory, num_blocks * block).view(batch_size, num_blocks, block, -1)
        hop_weights = []
        for _ in range(self.num_hops):
            # Eq. 4. Shape: (batch_size, num_blocks, block, num_keys)
            scores = torch.einsum("bnqd,bnkd->bnqk", query, keys)
            if self.null_memory:
                scores = torch.cat([scores.new_zeros(*scores.shape[:3], 1), scores], dim=-1)
            # Rows that see nothing (padding) come out uniform here, hence the product.
            weights = masked_softmax(scores, allowed, dim=-1, memory_efficient=True) * allowed
            hop_weights.append(weights)
            read = weights[..., 1:] if self.null_memory else weights
            # Eq. 5 and 6: u^{k+1} = o^k + u^k.
            query = torch.einsum("bnqk,bnkd->bnqd", read, values) + query

        output = query.reshape(batch_size, num_blocks * block, -1)[:, :num_steps]
        output = output.masked_fill(padding, 0.0)
        # Shape: (batch_size, num_hops, num_steps, num_keys)
        weights = torch.stack(hop_weights, dim=1).flatten(2, 3)[:, :, :num_steps]
        first_key_position = (torch.arange(num_steps, device=inputs.device) // block - before) * block
        return MemoryHopOutput(output, weights, first_key_position, self.null_memory)

    def _band(self, num_steps: int) -> Tuple[int, int, int]:
        """Block size and how many neighbouring blocks before/after each block's steps see."""
        if self.window is None or self.window >= num_steps:
            return max(num_steps, 1), 0, 0
        return self.window, 1, 0 if self.causal else 1

    def _visibility(self, block: int, before: int, after: int, device) -> torch.BoolTensor:
        """`(block, num_keys)`: may step `q` of a block see key slot `s` of its neighbourhood."""
        steps = torch.arange(block, device=device).unsqueeze(1) + before * block
        slots = torch.arange((before + 1 + after) * block, device=device).unsqueeze(0)
        distance = steps - slots
        visible = torch.ones_like(distance, dtype=torch.bool)
        if self.window is not None:
            visible = visible & (distance.abs() < self.window)
        if self.causal:
            visible = visible & (distance >= 0)
        if not self.include_self:
            visible = visible & (distance != 0)
        return visible


def _pad_steps(tensor: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pads dimension 1 of `(batch_size, num_steps, dim)` to `length`."""
    return torch.nn.functional.pad(tensor, (0, 0, 0, length - tensor.size(1)))


def _key_blocks(memory: torch.Tensor, block: int, before: int, after: int) -> torch.Tensor:
    """
    `(batch_size, num_steps, dim)` -> `(batch_size, num_blocks, (before + 1 + after) * block, dim)`:
    for each block of `block` steps, the memory of the `before` blocks preceding it, its own and the
    `after` blocks following it (zeros beyond the ends).
    """
    batch_size, num_steps, dim = memory.shape
    num_blocks = math.ceil(num_steps / block)
    padded = _pad_steps(memory, num_blocks * block).view(batch_size, num_blocks, block, dim)
    padded = torch.nn.functional.pad(padded, (0, 0, 0, 0, before, after))
    neighbours = [padded[:, shift : shift + num_blocks] for shift in range(before + 1 + after)]
    return torch.cat(neighbours, dim=2) if len(neighbours) > 1 else neighbours[0]
