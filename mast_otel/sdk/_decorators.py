"""Decorators that trace a function as a tool call (`@tool`) or as an agent run (`@agent`).

Both work on plain and `async` functions. Inside a run, `@tool` records a step of the current run;
outside any run it still emits a stand-alone `execute_tool` span.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from mast_otel.sdk._run import AgentRun, agent_run, tool_call_span

_Function = TypeVar("_Function", bound=Callable[..., Any])


def tool(name: str | None = None) -> Callable[[_Function], _Function]:
    """Trace every call as `execute_tool {name}`: arguments by parameter name, the return value as result.

    `name` defaults to the function's name. An exception marks the call failed and propagates.
    """

    def decorate(func: _Function) -> _Function:
        tool_name = name or func.__name__
        signature = inspect.signature(func)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def traced_coroutine(*args: Any, **kwargs: Any) -> Any:
                with tool_call_span(tool_name, arguments=_named_arguments(signature, args, kwargs)) as call:
                    result = await func(*args, **kwargs)
                    call.set_result(result)
                    return result

            return cast(_Function, traced_coroutine)

        @functools.wraps(func)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with tool_call_span(tool_name, arguments=_named_arguments(signature, args, kwargs)) as call:
                result = func(*args, **kwargs)
                call.set_result(result)
                return result

        return cast(_Function, traced)

    return decorate


def agent(
    name: str | None = None,
    *,
    model: str | None = None,
    provider_name: str | None = None,
    agent_id: str | None = None,
    task_param: str | None = None,
) -> Callable[[_Function], _Function]:
    """Run every call inside `agent_run(name, ...)`; `sdk.current_run()` gives the run inside.

    `task_param` names the parameter that holds the task text, recorded as the run's input. A `str`
    the function returns becomes the final answer unless the function set one itself.
    """

    def decorate(func: _Function) -> _Function:
        agent_name = name or func.__name__
        signature = inspect.signature(func)

        def task_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
            if task_param is None:
                return None
            task = _named_arguments(signature, args, kwargs).get(task_param)
            return None if task is None else str(task)

        def finish(run: AgentRun, result: object) -> None:
            if isinstance(result, str) and not run.has_final_answer:
                run.set_final_answer(result)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def traced_coroutine(*args: Any, **kwargs: Any) -> Any:
                with agent_run(
                    agent_name,
                    model=model,
                    provider_name=provider_name,
                    agent_id=agent_id,
                    task=task_of(args, kwargs),
                ) as run:
                    result = await func(*args, **kwargs)
                    finish(run, result)
                    return result

            return cast(_Function, traced_coroutine)

        @functools.wraps(func)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with agent_run(
                agent_name,
                model=model,
                provider_name=provider_name,
                agent_id=agent_id,
                task=task_of(args, kwargs),
            ) as run:
                result = func(*args, **kwargs)
                finish(run, result)
                return result

        return cast(_Function, traced)

    return decorate


def _named_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults included, without a method's `self`/`cls`."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {}  # the call itself raises the same TypeError, inside the span
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    first_parameter = next(iter(signature.parameters), None)
    if first_parameter in ("self", "cls"):
        arguments.pop(first_parameter)
    return arguments
