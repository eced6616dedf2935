"""Fix transforms for Hugging Face checkpointing arguments."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.huggingface import keyword_value
from ckptlint.model.library.transformers import GC_KWARGS
from ckptlint.analysis.transforms import set_keyword

NON_REENTRANT_KWARGS = '{"use_reentrant": False}'


def set_dict_key(mapping: cst.Dict, key: str, value: cst.BaseExpression) -> cst.Dict:
    """`mapping` with string key `key` set to `value`: replaced in place, else appended."""
    elements = list(mapping.elements)
    for index, element in enumerate(elements):
        if (
            isinstance(element, cst.DictElement)
            and isinstance(element.key, cst.SimpleString)
            and element.key.evaluated_value == key
        ):
            elements[index] = element.with_changes(value=value)
            return mapping.with_changes(elements=elements)
    quote = '"'
    for element in elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
            quote = element.key.quote
            break
    new = cst.DictElement(cst.SimpleString(f"{quote}{key}{quote}"), value)
    if elements:
        last = elements[-1]
        if isinstance(last.comma, cst.Comma):
            new = new.with_changes(comma=last.comma)
            elements[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=_after(last.comma)))
        else:
            elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elements.append(new)
    return mapping.with_changes(elements=elements)


def _after(comma: cst.Comma) -> cst.BaseParenthesizableWhitespace:
    whitespace = comma.whitespace_after
    return whitespace if isinstance(whitespace, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" ")


def non_reentrant(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """A `gradient_checkpointing_kwargs` value with `use_reentrant` set to False: a dict
    literal or `dict(...)` call updated, `None` (or nothing) replaced; None when the value
    cannot be rewritten (a variable)."""
    false = cst.Name("False")
    if value is None or (isinstance(value, cst.Name) and value.value == "None"):
        return cst.parse_expression(NON_REENTRANT_KWARGS)
    if isinstance(value, cst.Dict):
        return set_dict_key(value, "use_reentrant", false)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return set_keyword(value, "use_reentrant", false)
    return None


def with_non_reentrant_kwargs(call: cst.Call, positional_kwargs: bool = False) -> cst.Call | None:
    """`call` (a `gradient_checkpointing_enable(...)` or `TrainingArguments(...)`) with its
    checkpointing kwargs made non-reentrant."""
    if positional_kwargs:
        positional = [arg for arg in call.args if arg.keyword is None]
        if positional:
            new_value = non_reentrant(positional[0].value)
            if new_value is None:
                return None
            args = [arg.with_changes(value=new_value) if arg is positional[0] else arg for arg in call.args]
            return call.with_changes(args=args)
    new_value = non_reentrant(keyword_value(call, GC_KWARGS))
    return None if new_value is None else set_keyword(call, GC_KWARGS, new_value)
