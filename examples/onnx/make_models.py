"""Make the three control-flow ONNX models in this folder from PyTorch (TorchScript).

    pip install torch==2.13.0   # CPU wheel
    python examples/onnx/make_models.py

Each model is a scripted ``torch.nn.Module`` exported with the TorchScript
exporter (``torch.onnx.export(..., dynamo=False)``), which keeps Python
control flow as ONNX ``Loop`` / ``If``; weights come from a fixed seed. The
input values used for the committed ``*.npz`` files are made here too.

- ``greedy_decoder.onnx``: a greedy decoder whose ``for`` loop over
  ``max_len`` steps ``break``s at the end-of-sequence token: a Loop with a
  trip count input and a data-dependent condition. Outputs the final hidden
  state, the number of steps taken and a histogram of the emitted tokens.
- ``rnn_loop.onnx``: an Elman RNN written as a loop over ``steps`` time
  steps of ``x`` (``x[t]`` a Gather at the iteration number).
- ``if_on_data.onnx``: an If on the sign of the input's sum, each branch a
  linear layer with a different activation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
HIDDEN, VOCAB, EOS = 16, 12, 0


class GreedyDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.out = nn.Linear(HIDDEN, VOCAB)
        self.emb = nn.Parameter(torch.randn(VOCAB, HIDDEN) * 0.5)
        self.cell = nn.Linear(HIDDEN, HIDDEN)
        self.vocab_size = VOCAB
        self.eos = EOS

    def forward(self, h: torch.Tensor, max_len: torch.Tensor):
        steps = torch.zeros(1, dtype=torch.int64)
        counts = torch.zeros(1, self.vocab_size)
        vocab = torch.arange(self.vocab_size)
        for _ in range(int(max_len)):
            tok = torch.argmax(self.out(h), dim=1)
            if bool(tok[0] == self.eos):
                break
            counts = counts + (vocab == tok).to(torch.float32)
            h = torch.tanh(self.cell(h) + self.emb[tok])
            steps = steps + 1
        return h, steps, counts


class RnnLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, HIDDEN)
        self.rec = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor, h: torch.Tensor, steps: torch.Tensor):
        for t in range(int(steps)):
            h = torch.tanh(self.inp(x[t]) + self.rec(h))
        return h


class IfOnData(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(HIDDEN, HIDDEN)
        self.b = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor):
        if bool(x.sum() > 0):
            y = torch.relu(self.a(x))
        else:
            y = torch.tanh(self.b(x)) * 2.0
        return y


def export(module: nn.Module, args: tuple, names: list[str], outputs: list[str], path: Path):
    scripted = torch.jit.script(module)
    torch.onnx.export(scripted, args, str(path), input_names=names, output_names=outputs,
                      opset_version=17, dynamo=False)  # fmt: skip
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def main() -> None:
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    h0 = rng.standard_normal((1, HIDDEN)).astype(np.float32)
    export(GreedyDecoder().eval(), (torch.from_numpy(h0), torch.tensor(20)), ["h0", "max_len"],
           ["h", "steps", "counts"], HERE / "greedy_decoder.onnx")  # fmt: skip
    np.savez(HERE / "greedy_decoder.npz", h0=h0, max_len=np.array(20, np.int64))
    x = rng.standard_normal((64, 1, 8)).astype(np.float32)
    hz = np.zeros((1, HIDDEN), np.float32)
    export(RnnLoop().eval(), (torch.from_numpy(x), torch.from_numpy(hz), torch.tensor(32)),
           ["x", "h0", "steps"], ["h"], HERE / "rnn_loop.onnx")  # fmt: skip
    np.savez(HERE / "rnn_loop.npz", x=x, h0=hz, steps=np.array(32, np.int64))
    xi = rng.standard_normal((1, HIDDEN)).astype(np.float32)
    export(IfOnData().eval(), (torch.from_numpy(xi),), ["x"], ["y"], HERE / "if_on_data.onnx")
    np.savez(HERE / "if_on_data.npz", x=xi)


if __name__ == "__main__":
    main()
