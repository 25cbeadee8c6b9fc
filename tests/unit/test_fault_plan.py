import pytest

from rl_core.reliability import Fault, FaultSpecError, parse_faults


def test_parse_and_take_once():
    plan = parse_faults("raise:evaluate@3, kill:update@5,hang:rollout@2")
    assert plan.faults == (
        Fault("raise", "evaluate", 3),
        Fault("kill", "update", 5),
        Fault("hang", "rollout", 2),
    )
    assert plan.take("update", 4) is None
    assert plan.take("update", 5) == Fault("kill", "update", 5)
    assert plan.take("update", 5) is None  # fires once
    assert plan.take("rollout", 2, kinds=("kill_driver", "exit")) is None  # other kinds
    assert plan.take("rollout", 2) == Fault("hang", "rollout", 2)


def test_empty_plan():
    assert not parse_faults("")
    assert not parse_faults(None)
    assert parse_faults(" , ").faults == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("raise:evaluate", "is not KIND:STEP@ITERATION"),
        ("explode:update@1", "unknown kind 'explode'; allowed: raise, kill, hang"),
        ("raise:train@1", "unknown step 'train'; allowed: weight_sync, rollout"),
        ("raise:update@-1", "is not KIND:STEP@ITERATION"),
        ("raise:update@1,kill:update@1", "two faults at update@1"),
    ],
)
def test_bad_entries_name_the_entry(text, message):
    with pytest.raises(FaultSpecError, match=message):
        parse_faults(text)
