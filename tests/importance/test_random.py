"""The rand baseline explanation: reproducible with a seed, uniform over orderings."""

import pytest
import torch

from fmmlearn.masking import eligible_positions

from helpers.importance import TEXTS, make_batch, scores_of, tiny_bert


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


def test_rand_is_reproducible_and_uniform(bert):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS)
    draw = lambda seed: scores_of(model, tokenizer, batch, "rand", generator=torch.Generator().manual_seed(seed))  # noqa: E731
    first, again, other = draw(0), draw(0), draw(1)
    eligible = eligible_positions(batch)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert (first[~eligible] == 0).all() and ((first[eligible] >= 0) & (first[eligible] < 1)).all()
