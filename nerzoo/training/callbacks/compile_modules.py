"""
`torch.compile` of chosen submodules of the model for a training run, from a config.
"""

import logging
from typing import Any, Dict, List, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)


@TrainerCallback.register("compile_modules")
class CompileModules(TrainerCallback):
    """
    Compiles the named submodules of the model with `torch.compile` when training starts, in place
    (`torch.nn.Module.compile`): parameter names, the state dict and the archive stay as they are.
    On a GPU `mode: "reduce-overhead"` runs each compiled submodule's forward and backward as CUDA
    graphs, one launch where eager code launches a kernel per operator (cuDNN's LSTM: a few per
    time step), the lever for a step whose time goes to launches (docs/gpu.md).

    `text_field_embedder` and `encoder` (the default) compile without a graph break in `bilstm_crf`:
    `fast_character_encoding` encodes every slot rather than gathering the real tokens (a shape
    that depends on the data), `fast_lstm` keeps no cache of the host's, and torch's RNN modules are
    let into graphs (`torch._dynamo.config.allow_rnn`).  A submodule that breaks a graph still runs,
    in several graphs.  The CRF head stays eager.  Each new input shape may compile again: on an
    H200 with `reduce-overhead` it compiled at almost every batch (docs/gpu.md), so on a GPU the
    `cuda_graphs` callback is the lever.

    Registered as a `TrainerCallback` with name "compile_modules":
    `-o '{"trainer.callbacks": [{"type": "compile_modules", "mode": "reduce-overhead"}]}'`.

    # Parameters

    serialization_dir : `str`, required
        Passed in by the trainer; nothing is written there.
    modules : `List[str]`, optional (default = `["text_field_embedder", "encoder"]`)
        Names of submodules of the model (`get_submodule`).
    mode : `str`, optional (default = `None`)
        `torch.compile`'s: `None` (its default), `"reduce-overhead"` (CUDA graphs),
        `"max-autotune"`, ...
    backend : `str`, optional (default = `"inductor"`)
    dynamic : `bool`, optional (default = `None`)
        `torch.compile`'s: `None` compiles a shape that changed again as dynamic.
    fullgraph : `bool`, optional (default = `False`)
        Raise at a graph break instead of splitting the graph.
    """

    def __init__(
        self,
        serialization_dir: str,
        modules: Optional[List[str]] = None,
        mode: Optional[str] = None,
        backend: str = "inductor",
        dynamic: Optional[bool] = None,
        fullgraph: bool = False,
    ) -> None:
        super().__init__(serialization_dir)
        self.modules = ["text_field_embedder", "encoder"] if modules is None else list(modules)
        if not self.modules:
            raise ConfigurationError("compile_modules: name at least one submodule in `modules`")
        self.options: Dict[str, Any] = {"backend": backend, "dynamic": dynamic, "fullgraph": fullgraph}
        if mode is not None:
            self.options["mode"] = mode

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        model = trainer.model
        torch._dynamo.config.allow_rnn = True
        for name in self.modules:
            try:
                module = model.get_submodule(name)
            except AttributeError as error:
                raise ConfigurationError(
                    f"compile_modules: the model ({type(model).__name__}) has no submodule {name!r}: {error}"
                ) from None
            module.compile(**self.options)
            logger.info("compile_modules: %s compiled with %s", name, self.options)
