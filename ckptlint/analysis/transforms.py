"""Node transforms shared by rule fixes. They keep the call's layout: a keyword appended to a
multi-line call with a magic trailing comma goes on its own line, like the others."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst
from ckptlint.rule import Replacement


def set_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with keyword `name` set to `value`: replaced in place if present, else appended."""
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            args = list(call.args)
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    return _append_keyword(call, name, value)


def _append_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not call.args:
        return call.with_changes(args=[new_arg])
    args = list(call.args)
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # A trailing comma: the new argument goes after it and takes over the break before
        # the closing parenthesis; a comment after the old last argument stays on its line.
        after = last.comma.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace):
            between = _separator(call)
            indent = between.last_line if isinstance(between, cst.ParenthesizedWhitespace) else after.last_line
            last_comma = last.comma.with_changes(whitespace_after=after.with_changes(last_line=indent))
            new_comma = last.comma.with_changes(
                whitespace_after=after.with_changes(
                    first_line=cst.TrailingWhitespace(newline=after.first_line.newline), empty_lines=[]
                )
            )
        else:
            last_comma = last.comma.with_changes(whitespace_after=cst.SimpleWhitespace(" "))
            new_comma = last.comma
        new_arg = new_arg.with_changes(comma=new_comma, whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(comma=last_comma, whitespace_after_arg=cst.SimpleWhitespace(""))
    else:
        new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    args.append(new_arg)
    return call.with_changes(args=args)


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace between arguments: a line break and indent in an exploded call."""
    if len(call.args) >= 2 and isinstance(call.args[-2].comma, cst.Comma):
        return call.args[-2].comma.whitespace_after
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return call.whitespace_before_args
    return cst.SimpleWhitespace(" ")


def remove_dict_entry(dictionary: cst.Dict, entry: cst.BaseDictElement) -> cst.Dict:
    """`dictionary` without `entry`, the layout of the others kept (as `remove_keyword`)."""
    elements = list(dictionary.elements)
    index = elements.index(entry)
    removed = elements.pop(index)
    if index == len(elements) and elements:
        elements[-1] = elements[-1].with_changes(comma=removed.comma)
    return dictionary.with_changes(elements=elements)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    """`call` without keyword argument `name`, the layout of the others kept: removing the
    last argument hands its comma (a trailing one, or none) to the one before."""
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            break
    else:
        return call
    removed = args.pop(index)
    if index == len(args) and args:
        args[-1] = args[-1].with_changes(comma=removed.comma, whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)


def use_reentrant_false(call: cst.Call) -> Replacement:
    """The usual fix of a reentrant checkpoint call: `use_reentrant=False` written at it
    (replacing a written value, else added)."""
    return Replacement(call, set_keyword(call, "use_reentrant", cst.Name("False")))
