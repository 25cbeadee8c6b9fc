"""pass@k: the chance that at least one of k sampled responses to a prompt is correct.

The unbiased estimator of the Codex paper (Chen et al., 2021, "Evaluating Large Language
Models Trained on Code"): from ``n`` responses sampled per prompt, ``c`` of them correct,

    pass@k = 1 - C(n - c, k) / C(n, k)

(the chance that k responses drawn without replacement from the n include a correct one),
averaged over prompts. pass@1 is then the mean share of correct responses, and pass@n is
the share of prompts with at least one. It is computed as a product, without the large
binomial coefficients.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one prompt with ``c`` correct among ``n`` sampled responses.

    Raises:
        ValueError: Not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:  # every draw of k holds a correct response
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(correct: Sequence[int] | np.ndarray, n: int, k: int) -> float:
    """pass@k averaged over prompts, ``correct[i]`` of prompt i's ``n`` responses correct.

    Raises:
        ValueError: No prompts, or counts and ``k`` that :func:`pass_at_k` refuses.
    """
    counts = [int(c) for c in np.asarray(correct).ravel()]
    if not counts:
        raise ValueError("pass@k of no prompts")
    return float(np.mean([pass_at_k(n, c, k) for c in counts]))
