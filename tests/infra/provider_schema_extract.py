"""Extract the schema of the google_* types infra/ uses from hashicorp/terraform-provider-google's Go source.

    python -m tests.infra.provider_schema_extract <git-dir> <tag> [-o FILE] [--read DATE] [--resource T] [--data T]

``<git-dir>`` is a clone (bare or not) of https://github.com/hashicorp/terraform-provider-google; ``<tag>`` a
release tag such as ``v7.45.0``. Nothing is built or run: the provider's Go source at the tag is read with
``git show`` and the part of it that declares schemas is evaluated here (a small interpreter of the Go that
builds ``map[string]*schema.Schema`` values). Written to ``tests/infra/data/google-provider-<version>.json``
unless ``-o`` says otherwise; read by tests/infra/test_provider_schema.py.

What is evaluated, and how Terraform itself reads the same schema:

* a resource or data source is found where the provider registers it: ``registry.Schema{Name: ..., Type: ...,
  Schema: <expr>}`` (7.x) or the ``map[string]*schema.Resource`` tables of ``google/provider/
  provider_mmv1_resources.go`` (6.x); a plugin-framework resource by ``registry.FrameworkResource{Name, Func}``
  and its ``Schema`` method's ``resp.Schema = schema.Schema{...}``;
* composite literals (``&schema.Schema{...}``, ``&schema.Resource{...}``, ``map[string]*schema.Schema{...}``),
  package-level variables and functions of the provider's own packages (a function is run statement by
  statement: assignments, map index and field assignments, ``return``), and the few helpers that build or change
  schemas with loops (``tpgresource.MergeSchemas``, ``DatasourceSchemaFromResourceSchema``,
  ``Add{Required,Optional}FieldsToSchema``, ``FixDatasourceSchemaFlags``, ``DeleteFieldsFromSchema``,
  ``tpgiamresource.ResourceIamMember``) modelled here (``INTRINSICS``): each is accepted only with a body whose
  fingerprint is one the model was checked against, so a change upstream stops the extraction;
* an argument is a field that is ``Required`` or ``Optional`` (``Computed``-only fields cannot be set); a nested
  block is a ``TypeList``/``TypeSet`` field whose ``Elem`` is a ``*schema.Resource`` (unless ``ConfigMode`` is
  ``SchemaConfigModeAttr``), required when ``Required``;
* as the plugin SDK's ``CoreConfigSchema`` does, an SDK resource or data source without an ``id`` field gets an
  optional ``id`` argument, and one with ``Timeouts`` a ``timeouts`` block with an optional argument per
  timeout it declares.

Anything outside that subset that could change a schema (a loop or ``if`` that assigns into one, a call that is
given one and is not known) stops the extraction with an error rather than guessing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UPSTREAM = "https://github.com/hashicorp/terraform-provider-google"
MODULE = "github.com/hashicorp/terraform-provider-google/"
SDK_SCHEMA = "github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
FW_SCHEMA = ("github.com/hashicorp/terraform-plugin-framework/resource/schema",
             "github.com/hashicorp/terraform-plugin-framework/datasource/schema")
DATA = Path(__file__).resolve().parent / "data"
INFRA = Path(__file__).resolve().parents[2] / "infra"


class ExtractError(Exception):
    pass


# --- tokens -----------------------------------------------------------------------------------------------------
_OPS = sorted(["<<=", ">>=", "&^=", "...", "&&", "||", "<-", "++", "--", "==", "!=", "<=", ">=", ":=", "+=", "-=",
               "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>", "&^", "+", "-", "*", "/", "%", "&", "|", "^", "<",
               ">", "=", "!", "(", ")", "[", "]", "{", "}", ",", ";", ".", ":", "~"], key=len, reverse=True)
_TOKEN = re.compile(
    r"(?P<ws>[ \t\r]+)|(?P<nl>\n)|(?P<lc>//[^\n]*)|(?P<bc>/\*.*?\*/)"
    r"|(?P<raw>`[^`]*`)|(?P<str>\"(?:[^\"\\\n]|\\.)*\")|(?P<rune>'(?:[^'\\\n]|\\.[^']*)')"
    r"|(?P<num>\.?\d(?:[\w.]|[eEpP][+-])*)|(?P<id>[A-Za-z_]\w*)|(?P<op>" + "|".join(map(re.escape, _OPS)) + ")",
    re.S)
_SEMI_AFTER = {"id", "num", "str", "raw", "rune"}
_SEMI_AFTER_OPS = {")", "]", "}", "++", "--"}
_SEMI_AFTER_KW = {"break", "continue", "fallthrough", "return"}
KEYWORDS = {"break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for", "func",
            "go", "goto", "if", "import", "interface", "map", "package", "range", "return", "select", "struct",
            "switch", "type", "var"}


@dataclass(frozen=True)
class Tok:
    kind: str  # id, kw, num, str, op
    text: str
    line: int


def tokenize(src: str) -> list[Tok]:
    out: list[Tok] = []
    pos, line = 0, 1

    def semi() -> None:
        if out and (out[-1].kind in _SEMI_AFTER or (out[-1].kind == "op" and out[-1].text in _SEMI_AFTER_OPS)
                    or (out[-1].kind == "kw" and out[-1].text in _SEMI_AFTER_KW)):
            out.append(Tok("op", ";", line))

    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise ExtractError(f"cannot tokenize at line {line}: {src[pos:pos + 40]!r}")
        kind, text = m.lastgroup, m.group()
        pos = m.end()
        if kind == "nl" or (kind == "bc" and "\n" in text):
            semi()
        elif kind in ("ws", "lc", "bc"):
            pass
        elif kind == "id":
            out.append(Tok("kw" if text in KEYWORDS else "id", text, line))
        elif kind in ("raw", "str"):
            out.append(Tok("str", text, line))
        elif kind == "rune":
            out.append(Tok("num", text, line))
        else:
            out.append(Tok(kind, text, line))  # type: ignore[arg-type]
        line += text.count("\n")
    semi()
    return out


def go_string(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    return json.loads(text) if "\\x" not in text else text[1:-1]


# --- syntax -----------------------------------------------------------------------------------------------------
@dataclass
class Node:
    kind: str  # ident sel call index lit composite unary binary opaque funclit type paren
    a: Any = None
    b: Any = None
    c: Any = None
    line: int = 0


class Parser:
    def __init__(self, toks: list[Tok], start: int = 0) -> None:
        self.t, self.i = toks, start

    # helpers
    def peek(self, k: int = 0) -> Tok:
        return self.t[self.i + k] if self.i + k < len(self.t) else Tok("eof", "", -1)

    def at(self, *texts: str) -> bool:
        tok = self.peek()
        return tok.kind in ("op", "kw") and tok.text in texts

    def take(self, text: str | None = None) -> Tok:
        tok = self.peek()
        if text is not None and tok.text != text:
            raise ExtractError(f"line {tok.line}: expected {text!r}, found {tok.text!r}")
        self.i += 1
        return tok

    def skip_balanced(self) -> int:
        """Skip a ( [ or { group starting at the current token; return the index after it."""
        pairs = {"(": ")", "[": "]", "{": "}"}
        stack = [pairs[self.take().text]]
        while stack:
            tok = self.take()
            if tok.kind == "eof":
                raise ExtractError("unbalanced brackets")
            if tok.kind == "op" and tok.text in pairs:
                stack.append(pairs[tok.text])
            elif tok.kind == "op" and tok.text in (")", "]", "}") and tok.text != stack.pop():
                raise ExtractError(f"line {tok.line}: mismatched {tok.text}")
        return self.i

    # types
    def parse_type(self) -> Node:
        tok = self.peek()
        if self.at("*"):
            self.take()
            return Node("type", "*", self.parse_type(), line=tok.line)
        if self.at("["):
            self.take()
            if self.at("]"):
                self.take()
                return Node("type", "[]", self.parse_type(), line=tok.line)
            self.parse_expr()
            self.take("]")
            return Node("type", "[n]", self.parse_type(), line=tok.line)
        if self.at("map"):
            self.take()
            self.take("[")
            key = self.parse_type()
            self.take("]")
            return Node("type", "map", key, self.parse_type(), line=tok.line)
        if self.at("chan"):
            self.take()
            return Node("type", "chan", self.parse_type(), line=tok.line)
        if self.at("func"):
            self.take()
            self.skip_balanced()
            self._skip_results()
            return Node("type", "func", line=tok.line)
        if self.at("struct", "interface"):
            self.take()
            self.skip_balanced()
            return Node("type", tok.text, line=tok.line)
        if self.at("("):
            self.take()
            inner = self.parse_type()
            self.take(")")
            return inner
        if tok.kind == "id":
            self.take()
            node = Node("ident", tok.text, line=tok.line)
            if self.at(".") and self.peek(1).kind == "id":
                self.take()
                node = Node("sel", node, self.take().text, line=tok.line)
            if self.at("["):  # generic instantiation
                self.skip_balanced()
            return node
        raise ExtractError(f"line {tok.line}: expected a type, found {tok.text!r}")

    def _skip_results(self) -> None:
        """After a func's parameters: skip its result types, up to (not including) its body's ``{``."""
        while not self.at("{", ",", ")", ";", "]", "}") and self.peek().kind != "eof":
            if self.at("("):
                self.skip_balanced()
            elif self.at("struct", "interface"):
                self.take()
                self.skip_balanced()
            elif self.at("["):
                self.skip_balanced()
            else:
                self.take()

    # expressions
    _BINARY = {"||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "|", "^", "*", "/", "%", "<<", ">>", "&",
               "&^"}

    def parse_expr(self, composite: bool = True) -> Node:
        left = self.parse_unary(composite)
        while self.peek().kind == "op" and self.peek().text in self._BINARY:
            op = self.take().text
            right = self.parse_unary(composite)
            left = Node("binary", op, left, right, line=left.line)
        return left

    def parse_unary(self, composite: bool = True) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("&", "!", "-", "+", "^", "*", "<-"):
            self.take()
            operand = self.parse_unary(composite)
            return operand if tok.text == "&" else Node("unary", tok.text, operand, line=tok.line)
        return self.parse_primary(composite)

    def parse_operand(self, composite: bool) -> Node:
        tok = self.peek()
        if tok.kind in ("num",):
            self.take()
            return Node("lit", tok.text, line=tok.line)
        if tok.kind == "str":
            self.take()
            return Node("lit", go_string(tok.text), "string", line=tok.line)
        if tok.kind == "id":
            self.take()
            return Node("ident", tok.text, line=tok.line)
        if self.at("("):
            self.take()
            inner = self.parse_expr(True)
            self.take(")")
            return Node("paren", inner, line=tok.line)
        if self.at("func"):
            self.take()
            self.skip_balanced()
            self._skip_results()
            if self.at("{"):
                start = self.i
                self.skip_balanced()
                return Node("funclit", start, line=tok.line)
            return Node("type", "func", line=tok.line)
        if self.at("[", "map", "chan", "struct", "interface", "*"):
            return self.parse_type()
        raise ExtractError(f"line {tok.line}: unexpected {tok.text!r}")

    def parse_primary(self, composite: bool = True) -> Node:
        node = self.parse_operand(composite)
        while True:
            tok = self.peek()
            if self.at("."):
                self.take()
                if self.at("("):
                    self.take()
                    if self.at("type"):
                        self.take()
                        target = None
                    else:
                        target = self.parse_type()
                    self.take(")")
                    node = Node("assert", node, target, line=tok.line)
                else:
                    node = Node("sel", node, self.take().text, line=tok.line)
            elif self.at("("):
                self.take()
                args = []
                while not self.at(")"):
                    if self.at("[", "map", "chan", "func", "*") and node.kind == "ident" and node.a in ("make", "new"):
                        args.append(self.parse_type())
                    else:
                        args.append(self.parse_expr(True))
                    if self.at("..."):
                        self.take()
                    if not self.at(")"):
                        self.take(",")
                self.take(")")
                node = Node("call", node, args, line=tok.line)
            elif self.at("["):
                self.take()
                parts: list[Node | None] = [None]
                while not self.at("]"):
                    if self.at(":"):
                        self.take()
                        parts.append(None)
                    else:
                        parts[-1] = self.parse_expr(True)
                        if self.at(","):  # generic with several type arguments
                            self.take()
                self.take("]")
                node = Node("index", node, parts[0], len(parts) > 1, line=tok.line)
            elif self.at("{") and composite and self._is_type_like(node):
                node = self.parse_composite(node)
            else:
                return node

    @staticmethod
    def _is_type_like(node: Node) -> bool:
        return (node.kind == "type" or node.kind == "ident"
                or (node.kind == "sel" and node.a.kind == "ident")
                or (node.kind == "index" and Parser._is_type_like(node.a)))

    def parse_composite(self, typ: Node | None) -> Node:
        line = self.take("{").line
        elems: list[tuple[Node | None, Node]] = []
        while not self.at("}"):
            first = self.parse_element()
            if self.at(":"):
                self.take()
                elems.append((first, self.parse_element()))
            else:
                elems.append((None, first))
            if not self.at("}"):
                self.take(",")
        self.take("}")
        return Node("composite", typ, elems, line=line)

    def parse_element(self) -> Node:
        if self.at("{"):
            return self.parse_composite(None)
        return self.parse_expr(True)

    # statements
    def parse_block(self) -> list[Node]:
        self.take("{")
        stmts: list[Node] = []
        while not self.at("}"):
            if self.at(";"):
                self.take()
                continue
            stmts.append(self.parse_stmt())
        self.take("}")
        return stmts

    def parse_stmt(self) -> Node:
        tok = self.peek()
        if self.at("return"):
            self.take()
            values = []
            while not self.at(";", "}"):
                values.append(self.parse_expr(True))
                if self.at(","):
                    self.take()
            return Node("return", values, line=tok.line)
        if self.at("if", "for", "switch", "select"):
            start = self.i
            while True:
                self.take()  # the keyword (or else)
                while not self.at("{"):  # the header: a composite literal of a named type in it is parenthesised
                    if self.peek().kind == "eof":
                        raise ExtractError("unterminated statement")
                    if (self.at("[") and self.peek(1).text == "]") or self.at("map"):  # []T{...}, map[K]V{...}
                        self.parse_type()
                        if self.at("{"):
                            self.skip_balanced()
                    elif self.at("(", "["):
                        self.skip_balanced()
                    elif self.at("func"):
                        self.take()
                        self.skip_balanced()
                        self._skip_results()
                        self.skip_balanced()
                    else:
                        self.take()
                self.skip_balanced()
                if not self.at("else"):
                    break
                self.take()
                if not self.at("if"):
                    self.skip_balanced()
                    break
            return Node("opaque", start, self.i, line=tok.line)
        if self.at("{"):
            start = self.i
            self.skip_balanced()
            return Node("opaque", start, self.i, line=tok.line)
        if self.at("go", "defer", "goto", "break", "continue", "type", "const"):
            start = self.i
            while not self.at(";", "}"):
                if self.peek().kind == "eof":
                    raise ExtractError("unterminated statement")
                if self.at("(", "[", "{"):
                    self.skip_balanced()
                else:
                    self.take()
            return Node("opaque", start, self.i, line=tok.line)
        if self.at("var"):
            self.take()
            name = self.take().text
            if not self.at("="):
                self.parse_type()
            if self.at("="):
                self.take()
                return Node("assign", [Node("ident", name)], [self.parse_expr(True)], ":=", line=tok.line)
            return Node("assign", [Node("ident", name)], [Node("opaque", None)], ":=", line=tok.line)
        lhs = [self.parse_expr(True)]
        while self.at(","):
            self.take()
            lhs.append(self.parse_expr(True))
        if self.peek().kind == "op" and self.peek().text in (":=", "=", "+=", "-=", "|=", "&=", "*=", "/="):
            op = self.take().text
            if self.at("range"):
                raise ExtractError(f"line {tok.line}: range outside for")
            rhs = [self.parse_expr(True)]
            while self.at(","):
                self.take()
                rhs.append(self.parse_expr(True))
            return Node("assign", lhs, rhs, op, line=tok.line)
        if self.at("++", "--"):
            self.take()
        return Node("expr", lhs[0], line=tok.line)


# --- source access ----------------------------------------------------------------------------------------------
class Source:
    """Files of one tag of the provider's repository, read through git."""

    def __init__(self, git_dir: str, tag: str) -> None:
        self.git_dir, self.tag = git_dir, tag
        self.commit = self.git("rev-parse", f"{tag}^{{commit}}").strip()
        self.date = self.git("log", "-1", "--format=%cI", self.commit).strip()
        self._text: dict[str, str] = {}
        self._files: dict[str, GoFile] = {}

    def git(self, *args: str) -> str:
        proc = subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True, text=True, check=False)
        if proc.returncode not in (0, 1):
            raise ExtractError(f"git {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def text(self, path: str) -> str:
        if path not in self._text:
            self._text[path] = self.git("show", f"{self.commit}:{path}")
        return self._text[path]

    def grep(self, pattern: str, pathspec: str) -> list[str]:
        out = self.git("grep", "-l", "-P", pattern, self.commit, "--", pathspec, ":(exclude,glob)**/*_test.go")
        return sorted({line.split(":", 1)[1] for line in out.splitlines() if line})

    def file(self, path: str) -> GoFile:
        if path not in self._files:
            self._files[path] = GoFile(path, self.text(path))
        return self._files[path]


@dataclass
class Decl:
    kind: str  # func var method
    name: str
    file: GoFile
    start: int  # token index of the value expression (var) or of the parameter list (func)
    receiver: str = ""


class GoFile:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.package_dir = path.rsplit("/", 1)[0]
        self.toks = tokenize(text)
        self.imports: dict[str, str] = {}
        self.decls: dict[str, Decl] = {}
        self.methods: dict[tuple[str, str], Decl] = {}
        self._index()

    def _index(self) -> None:
        p = Parser(self.toks)
        while p.peek().kind != "eof":
            tok = p.peek()
            if p.at("import"):
                p.take()
                specs = []
                if p.at("("):
                    p.take()
                    while not p.at(")"):
                        if p.at(";"):
                            p.take()
                            continue
                        alias = p.take().text if p.peek().kind in ("id", "op") and p.peek().kind != "str" else None
                        specs.append((alias, go_string(p.take().text)))
                    p.take(")")
                else:
                    alias = p.take().text if p.peek().kind != "str" else None
                    specs.append((alias, go_string(p.take().text)))
                for alias, path in specs:
                    name = alias or path.rstrip("/").rsplit("/", 1)[-1]
                    if re.fullmatch(r"v\d+", name):
                        name = path.rsplit("/", 2)[-2]
                    self.imports[name] = path
            elif p.at("func"):
                p.take()
                receiver = ""
                if p.at("("):
                    rstart = p.i
                    p.skip_balanced()
                    receiver = next(t.text for t in reversed(self.toks[rstart:p.i]) if t.kind == "id")
                name = p.take().text
                if p.at("["):
                    p.skip_balanced()
                decl = Decl("method" if receiver else "func", name, self, p.i, receiver)
                if receiver:
                    self.methods[(receiver, name)] = decl
                else:
                    self.decls[name] = decl
                p.skip_balanced()  # parameters
                p._skip_results()
                if p.at("{"):
                    p.skip_balanced()
            elif p.at("var", "const"):
                p.take()
                if p.at("("):
                    p.take()
                    while not p.at(")"):
                        if p.at(";"):
                            p.take()
                            continue
                        self._var_spec(p)
                    p.take(")")
                else:
                    self._var_spec(p)
            elif p.at("type"):
                p.take()
                if p.at("("):
                    p.skip_balanced()
                else:
                    p.take()
                    if p.at("["):
                        p.skip_balanced()
                    if p.at("="):
                        p.take()
                    p.parse_type()
            elif (tok.kind == "op" and tok.text == ";") or p.at("package"):
                p.take()
                if tok.text == "package":
                    p.take()
            else:
                raise ExtractError(f"{self.path}:{tok.line}: unexpected top-level {tok.text!r}")

    def _var_spec(self, p: Parser) -> None:
        names = [p.take().text]
        while p.at(","):
            p.take()
            names.append(p.take().text)
        if not p.at("=", ";", ")"):
            p.parse_type()
        if p.at("="):
            p.take()
            for k, name in enumerate(names):
                self.decls[name] = Decl("var", name, self, p.i)
                p.parse_expr(True)
                if k + 1 < len(names):
                    p.take(",")
        else:
            for name in names:
                self.decls.setdefault(name, Decl("var", name, self, -1))

    def resolve_import(self, alias: str) -> str | None:
        return self.imports.get(alias)


# --- values -----------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class Thunk:
    node: Node
    ctx: Ctx
    _value: Any = None
    _done: bool = False

    def get(self, ev: Evaluator) -> Any:
        if not self._done:
            self._value = ev.eval(self.node, self.ctx)
            self._done = True
        return self._value


def thunk_value(value: Any) -> Thunk:
    t = Thunk(Node("opaque"), None)  # type: ignore[arg-type]
    t._value, t._done = value, True
    return t


@dataclass(eq=False)
class Struct:
    """A composite literal of a struct type, its fields kept unevaluated until read."""

    type: tuple[str, str]  # (import path, type name)
    fields: dict[str, Thunk] = field(default_factory=dict)

    def get(self, ev: Evaluator, name: str, default: Any = None) -> Any:
        t = self.fields.get(name)
        return default if t is None else t.get(ev)

    def set(self, name: str, value: Any) -> None:
        self.fields[name] = thunk_value(value)


@dataclass(eq=False)
class GoMap:
    elem: tuple[str, str] | None
    items: dict[str, Thunk] = field(default_factory=dict)


@dataclass(frozen=True)
class Opaque:
    what: str


@dataclass
class Ctx:
    file: GoFile
    env: dict[str, Any]


class Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _body(decl: Decl) -> tuple[list[str], list[Node], int]:
    """A function declaration's parameter names, body statements and end."""
    p = Parser(decl.file.toks, decl.start)
    pstart = p.i
    p.skip_balanced()
    params = _param_names(decl.file.toks[pstart + 1:p.i - 1])
    p._skip_results()
    return params, p.parse_block(), p.i


def _param_names(toks: list[Tok]) -> list[str]:
    groups: list[list[Tok]] = [[]]
    depth = 0
    for tok in toks:
        if tok.kind == "op" and tok.text in "([{":
            depth += 1
        elif tok.kind == "op" and tok.text in ")]}":
            depth -= 1
        if tok.kind == "op" and tok.text == "," and depth == 0:
            groups.append([])
        else:
            groups[-1].append(tok)
    return [g[0].text if g and g[0].kind == "id" else "_" for g in groups if g]


# Helpers of the provider's own packages that are evaluated here rather than by their Go (loops over maps), with
# the fingerprints (sha256 of the body's tokens, ``Evaluator.fingerprint``) of the bodies this model was checked
# against, by reading them: v6.50.0 and v7.45.0. A body with another fingerprint stops the extraction until it is
# read and its fingerprint added here (or the model changed).
#   MergeSchemas(a, b): a new map, b's entries over a's.
#   DatasourceSchemaFromResourceSchema(rs): every field Computed only (not Required, not Optional), nested blocks
#     alike; the type and element kept.
#   FixDatasourceSchemaFlags(m, required, keys...): those fields Required (or Optional), not Computed;
#     Add{Required,Optional}FieldsToSchema call it with true (false); DeleteFieldsFromSchema deletes the keys.
#   tpgiamresource.ResourceIamMember(parent, ...): Schema = MergeSchemas(IamMemberBaseSchema, parent); 7.x adds a
#     create timeout when an IamCreateTimeOut(n > 0) option is given (IamCreateTimeOut sets CreateTimeOut).
INTRINSICS: dict[tuple[str, str], set[str]] = {
    ("google/tpgresource", "MergeSchemas"): {"dc281e57d4cd7c24"},
    ("google/tpgresource", "DatasourceSchemaFromResourceSchema"): {"a879ba378c91e3c3"},
    ("google/tpgresource", "FixDatasourceSchemaFlags"): {"7c0725821449004a"},
    ("google/tpgresource", "AddRequiredFieldsToSchema"): {"33d0df485a2b054d"},
    ("google/tpgresource", "AddOptionalFieldsToSchema"): {"559adb201d236e5d"},
    ("google/tpgresource", "DeleteFieldsFromSchema"): {"93e2dd328cb22151"},
    ("google/tpgiamresource", "ResourceIamMember"): {"1001c078cb581fcc", "fa86381ac90bf400"},
    ("google/tpgiamresource", "IamCreateTimeOut"): {"b46392c6162d236d"},
}
# Calls whose result is never a schema and that change none of their arguments' schemas.
HARMLESS_CALLS = re.compile(r"^(fmt|log|errors|strings|regexp|time|verify|validation|customdiff)\.")
MUTATORS = re.compile(r"\b(AddRequiredFieldsToSchema|AddOptionalFieldsToSchema|FixDatasourceSchemaFlags|"
                      r"DeleteFieldsFromSchema|delete)\s*\(")
RELEVANT_FIELDS = {"Schema", "Elem", "Required", "Optional", "Computed", "Type", "ConfigMode", "Timeouts",
                   "Attributes", "Blocks", "NestedObject", "Validators"}


class Evaluator:
    def __init__(self, src: Source) -> None:
        self.src = src
        self._pkg_files: dict[tuple[str, str], GoFile | None] = {}
        self._vars: dict[tuple[str, str], Any] = {}
        self._checked: set[tuple[str, str]] = set()
        self.depth = 0

    # lookup
    def lookup(self, package_dir: str, name: str) -> Decl | None:
        key = (package_dir, name)
        if key not in self._pkg_files:
            n = re.escape(name)
            pattern = rf"^(func {n}\b|func {n}\[|(var|const) {n}\b|\t{n}(\s*,\s*\w+)*\s+=[^=]|\t{n}\s+[^=(]*=[^=])"
            found = None
            for path in self.src.grep(pattern, f":(glob){package_dir}/*.go"):
                f = self.src.file(path)
                if name in f.decls:
                    found = f
                    break
            self._pkg_files[key] = found
        f = self._pkg_files[key]
        return f.decls[name] if f else None

    def lookup_method(self, package_dir: str, receiver: str, name: str) -> Decl:
        pattern = rf"^func \(\w+ \*?{re.escape(receiver)}\) {re.escape(name)}\("
        for path in self.src.grep(pattern, f":(glob){package_dir}/*.go"):
            decl = self.src.file(path).methods.get((receiver, name))
            if decl:
                return decl
        raise ExtractError(f"no method {receiver}.{name} in {package_dir}")

    def body_text(self, package_dir: str, name: str) -> str:
        """A function's source (parameters, results and body), whitespace and comments removed."""
        decl = self.lookup(package_dir, name)
        if decl is None:
            raise ExtractError(f"{package_dir}.{name} is gone: the extractor's model of it is out of date")
        _, _, end = _body(decl)
        return "".join(t.text for t in decl.file.toks[decl.start:end] if t.text != ";")

    def fingerprint(self, package_dir: str, name: str) -> str:
        return hashlib.sha256(self.body_text(package_dir, name).encode()).hexdigest()[:16]

    def check_intrinsic(self, package_dir: str, name: str) -> None:
        key = (package_dir, name)
        if key in self._checked:
            return
        found = self.fingerprint(package_dir, name)
        if found not in INTRINSICS[key]:
            raise ExtractError(f"{package_dir}.{name} changed upstream (fingerprint {found}, the model was checked "
                               f"against {sorted(INTRINSICS[key])}): read it, then update the model and INTRINSICS")
        self._checked.add(key)

    def iam_member(self, node: Node, ctx: Ctx) -> Struct:
        """tpgiamresource.ResourceIamMember(parentSchema, updater, idParser, options...)."""
        pkg = "google/tpgiamresource"
        base = self.global_value(pkg, "IamMemberBaseSchema")
        parent = self.eval(node.b[0], ctx)
        if not isinstance(base, GoMap) or not isinstance(parent, GoMap):
            raise ExtractError(f"{ctx.file.path}:{node.line}: ResourceIamMember of a schema not known")
        r = Struct((SDK_SCHEMA, "Resource"))
        r.set("Schema", GoMap(base.elem, {**base.items, **parent.items}))
        text = self.body_text(pkg, "ResourceIamMember")
        if "Timeouts" in text:
            self.check_intrinsic(pkg, "IamCreateTimeOut")
            for opt in node.b[3:]:
                if opt.kind == "call" and opt.a.kind == "sel" and opt.a.b == "IamCreateTimeOut":
                    minutes = opt.b[0]
                    if minutes.kind != "lit" or not minutes.a.isdigit():
                        raise ExtractError(f"{ctx.file.path}:{node.line}: IamCreateTimeOut of a value not known")
                    if int(minutes.a) > 0:
                        r.set("Timeouts", Struct((SDK_SCHEMA, "ResourceTimeout"),
                                                 {"Create": thunk_value(Opaque("timeout"))}))
                elif opt.kind == "call" and opt.a.kind == "sel" and opt.a.a.kind == "ident":
                    if "CreateTimeOut" in self.body_text(pkg, opt.a.b):
                        raise ExtractError(f"{ctx.file.path}:{node.line}: {opt.a.b} sets the create timeout")
                elif opt.kind == "sel" and "CreateTimeOut" in self.body_text(pkg, opt.b):
                    raise ExtractError(f"{ctx.file.path}:{node.line}: {opt.b} sets the create timeout")
        return r

    def package_of(self, ctx: Ctx, alias: str) -> str | None:
        path = ctx.file.resolve_import(alias)
        if path and path.startswith(MODULE):
            return path[len(MODULE):]
        return None

    def type_of(self, node: Node | None, ctx: Ctx) -> tuple[str, str] | None:
        """(import path, name) of a composite literal's type; map types give ("map", elem...)."""
        if node is None:
            return None
        if node.kind == "type" and node.a == "*":
            return self.type_of(node.b, ctx)
        if node.kind == "sel" and node.a.kind == "ident":
            return (ctx.file.resolve_import(node.a.a) or node.a.a, node.b)
        if node.kind == "ident":
            return (MODULE + ctx.file.package_dir, node.a)
        if node.kind == "type" and node.a == "map":
            return ("map", "")
        if node.kind == "type":
            return ("other", node.a)
        return None

    # evaluation
    def eval(self, node: Node, ctx: Ctx) -> Any:
        kind = node.kind
        if kind == "lit":
            return node.a if node.b == "string" else Opaque(node.a)
        if kind == "paren":
            return self.eval(node.a, ctx)
        if kind == "ident":
            return self.ident(node.a, ctx)
        if kind == "composite":
            return self.composite(node, ctx, None)
        if kind == "sel":
            if node.a.kind == "ident" and node.a.a not in ctx.env:
                pkg = self.package_of(ctx, node.a.a)
                if pkg is not None:
                    return self.global_value(pkg, node.b)
                if ctx.file.resolve_import(node.a.a) is not None:
                    return Opaque(f"{node.a.a}.{node.b}")
            base = self.eval(node.a, ctx)
            if isinstance(base, Struct):
                return base.get(self, node.b)
            return Opaque(f"?.{node.b}")
        if kind == "index":
            base = self.eval(node.a, ctx)
            if isinstance(base, GoMap) and not node.c:
                key = self.eval(node.b, ctx)
                if not isinstance(key, str):
                    raise ExtractError(f"{ctx.file.path}:{node.line}: map index that is not a string")
                if key not in base.items:
                    raise ExtractError(f"{ctx.file.path}:{node.line}: no key {key!r} in the map")
                return base.items[key].get(self)
            return Opaque("index")
        if kind == "call":
            return self.call(node, ctx)
        if kind == "binary" and node.a == "+":
            left, right = self.eval(node.b, ctx), self.eval(node.c, ctx)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            return Opaque("+")
        if kind == "unary":
            if node.a == "!":
                v = self.eval(node.b, ctx)
                return (not v) if isinstance(v, bool) else Opaque("!")
            return Opaque(node.a)
        if kind == "assert":
            return self.eval(node.a, ctx)
        return Opaque(kind)

    def ident(self, name: str, ctx: Ctx) -> Any:
        if name in ctx.env:
            v = ctx.env[name]
            return v.get(self) if isinstance(v, Thunk) else v
        if name in ("true", "false"):
            return name == "true"
        if name == "nil":
            return None
        return self.global_value(ctx.file.package_dir, name)

    def global_value(self, package_dir: str, name: str) -> Any:
        key = (package_dir, name)
        if key in self._vars:
            return self._vars[key]
        decl = self.lookup(package_dir, name)
        if decl is None or decl.kind != "var" or decl.start < 0:
            value: Any = Opaque(f"{package_dir}.{name}")
        else:
            self._vars[key] = Opaque("cycle")
            expr = Parser(decl.file.toks, decl.start).parse_expr(True)
            value = self.eval(expr, Ctx(decl.file, {}))
        self._vars[key] = value
        return value

    def composite(self, node: Node, ctx: Ctx, implied: tuple[str, str] | None) -> Any:
        typ = self.type_of(node.a, ctx) if node.a is not None else implied
        if node.a is not None and node.a.kind == "type" and node.a.a == "map":
            elem = self.type_of(node.a.c, ctx)
            out = GoMap(elem)
            for key, value in node.b:
                k = self.eval(key, ctx) if key is not None else None
                if not isinstance(k, str):
                    raise ExtractError(f"{ctx.file.path}:{node.line}: map key that is not a string")
                if value.kind == "composite" and value.a is None:
                    v = self.composite(value, ctx, elem)
                    out.items[k] = thunk_value(v)
                else:
                    out.items[k] = Thunk(value, ctx)
            return out
        if typ is None or typ[0] in ("map", "other"):
            return Opaque("composite")
        s = Struct(typ)
        for key, value in node.b:
            if key is None or key.kind != "ident":
                return Opaque("positional composite")
            if value.kind == "composite" and value.a is None:
                s.fields[key.a] = thunk_value(Opaque("elided"))
            else:
                s.fields[key.a] = Thunk(value, ctx)
        return s

    def call(self, node: Node, ctx: Ctx) -> Any:
        fn = node.a
        if fn.kind == "ident" and fn.a == "make":
            return GoMap(None) if node.b and node.b[0].kind == "type" and node.b[0].a == "map" else Opaque("make")
        if fn.kind == "ident" and fn.a in ctx.env:
            return Opaque("call of a local")
        if fn.kind == "ident":
            package_dir, name = ctx.file.package_dir, fn.a
        elif fn.kind == "sel" and fn.a.kind == "ident" and fn.a.a not in ctx.env:
            pkg = self.package_of(ctx, fn.a.a)
            if pkg is None:
                return Opaque(f"{fn.a.a}.{fn.b}()")
            package_dir, name = pkg, fn.b
        else:
            return Opaque("method call")
        if (package_dir, name) in INTRINSICS:
            self.check_intrinsic(package_dir, name)
            if name == "ResourceIamMember":
                return self.iam_member(node, ctx)
            return self.intrinsic(name, [self.eval(a, ctx) for a in node.b], node, ctx)
        decl = self.lookup(package_dir, name)
        if decl is None or decl.kind != "func":
            return Opaque(f"{package_dir}.{name}()")
        scope = Ctx(ctx.file, dict(ctx.env))
        return self.run(decl, [Thunk(a, scope) for a in node.b])

    def run(self, decl: Decl, args: list[Thunk]) -> Any:
        self.depth += 1
        if self.depth > 60:
            raise ExtractError("call depth over 60")
        try:
            params, body, _ = _body(decl)
            env: dict[str, Any] = {}
            for k, name in enumerate(params):
                if name != "_":
                    env[name] = args[k] if k < len(args) else Opaque("variadic")
            ctx = Ctx(decl.file, env)
            try:
                self.exec(body, ctx, decl)
            except Return as r:
                return r.value
            return None
        finally:
            self.depth -= 1

    def exec(self, body: list[Node], ctx: Ctx, decl: Decl) -> None:
        where = f"{decl.file.path}:{decl.name}"
        for stmt in body:
            if stmt.kind == "return":
                raise Return(self.eval(stmt.a[0], ctx) if len(stmt.a) == 1 else Opaque("tuple"))
            if stmt.kind == "assign":
                self.assign(stmt, ctx, where)
            elif stmt.kind == "expr":
                e = stmt.a
                if e.kind == "call":
                    self.call_stmt(e, ctx, where)
            elif stmt.kind == "opaque":
                text = " ".join(t.text for t in decl.file.toks[stmt.a:stmt.b])
                self.check_opaque(text, ctx, where, stmt.line)

    def _is_schema_value(self, v: Any) -> bool:
        if isinstance(v, Thunk):
            try:
                v = v.get(self)
            except ExtractError:
                return False  # a value no schema is read from (if one is, reading it fails then)
        return isinstance(v, (GoMap, Struct))

    def check_opaque(self, text: str, ctx: Ctx, where: str, line: int) -> None:
        """A statement not run here (if, for, switch...) must not change a schema."""
        if MUTATORS.search(text):
            raise ExtractError(f"{where}:{line}: a schema may be changed in a statement not evaluated: {text[:120]}")
        for name, value in ctx.env.items():
            if not self._is_schema_value(value):
                continue
            n = re.escape(name)
            fields = "|".join(RELEVANT_FIELDS)
            index = rf"\b{n} \[[^\]]*\] (\. ({fields}) )?=(?!=)"  # m["k"] = ..., m["k"].Required = ...
            field = rf"\b{n} \. ({fields}) (\[[^\]]*\] )?(\. \w+ )?=(?!=)"  # r.Schema = ..., r.Schema["k"].X = ...
            if re.search(f"{index}|{field}", text):
                raise ExtractError(f"{where}:{line}: {name} is changed in a statement not evaluated: {text[:120]}")

    def assign(self, stmt: Node, ctx: Ctx, where: str) -> None:
        lhs, rhs, op = stmt.a, stmt.b, stmt.c
        if op not in (":=", "="):
            return
        if len(lhs) != len(rhs):
            for target in lhs:
                if target.kind == "ident":
                    ctx.env[target.a] = Opaque("multi")
            return
        for target, value in zip(lhs, rhs, strict=True):
            if target.kind == "ident":
                if target.a != "_":  # evaluated (lazily) in the scope as it is now, as Go evaluates it now
                    ctx.env[target.a] = Thunk(value, Ctx(ctx.file, dict(ctx.env)))
            elif target.kind == "index":
                base = self.eval(target.a, ctx)
                if isinstance(base, GoMap):
                    key = self.eval(target.b, ctx)
                    if not isinstance(key, str):
                        raise ExtractError(f"{where}:{stmt.line}: map assignment with a key not known")
                    base.items[key] = thunk_value(self.eval(value, ctx))
            elif target.kind == "sel":
                base = self.eval(target.a, ctx)
                if isinstance(base, Struct):
                    base.set(target.b, self.eval(value, ctx))
                elif target.b in RELEVANT_FIELDS and not isinstance(base, Opaque):
                    raise ExtractError(f"{where}:{stmt.line}: assignment to .{target.b} of a value not known")

    def call_stmt(self, e: Node, ctx: Ctx, where: str) -> None:
        fn = e.a
        name = fn.b if fn.kind == "sel" else fn.a if fn.kind == "ident" else ""
        if fn.kind == "sel" and fn.a.kind == "ident" and self.package_of(ctx, fn.a.a) == "google/tpgresource" \
                and ("google/tpgresource", name) in INTRINSICS:
            self.call(e, ctx)
            return
        if fn.kind == "ident" and fn.a == "delete":
            base = self.eval(e.b[0], ctx)
            key = self.eval(e.b[1], ctx)
            if isinstance(base, GoMap) and isinstance(key, str):
                base.items.pop(key, None)
                return
        text_args = [a for a in e.b if a.kind == "ident" and a.a in ctx.env and self._is_schema_value(ctx.env[a.a])]
        if text_args and not (fn.kind == "sel" and fn.a.kind == "ident"
                              and HARMLESS_CALLS.match(f"{fn.a.a}.")):
            raise ExtractError(f"{where}:{e.line}: {name}() is given a schema and is not evaluated here")

    def intrinsic(self, name: str, args: list[Any], node: Node, ctx: Ctx) -> Any:
        def need_map(v: Any) -> GoMap:
            if not isinstance(v, GoMap):
                raise ExtractError(f"{ctx.file.path}:{node.line}: {name} of a value not known")
            return v

        def names(vs: list[Any]) -> list[str]:
            if not all(isinstance(v, str) for v in vs):
                raise ExtractError(f"{ctx.file.path}:{node.line}: {name} with names not known")
            return vs

        if name == "MergeSchemas":
            a, b = need_map(args[0]), need_map(args[1])
            return GoMap(a.elem, {**a.items, **b.items})
        if name == "DatasourceSchemaFromResourceSchema":
            return self.datasource_schema(need_map(args[0]))
        if name in ("AddRequiredFieldsToSchema", "AddOptionalFieldsToSchema", "FixDatasourceSchemaFlags"):
            m = need_map(args[0])
            if name == "FixDatasourceSchemaFlags":
                required, keys = args[1], names(args[2:])
                if not isinstance(required, bool):
                    raise ExtractError(f"{ctx.file.path}:{node.line}: FixDatasourceSchemaFlags flag not known")
            else:
                required, keys = name == "AddRequiredFieldsToSchema", names(args[1:])
            for key in keys:
                if key not in m.items:
                    raise ExtractError(f"{ctx.file.path}:{node.line}: {name}: no field {key!r}")
                s = m.items[key].get(self)
                s.set("Computed", False)
                s.set("Optional", not required)
                s.set("Required", required)
            return None
        if name == "DeleteFieldsFromSchema":
            m = need_map(args[0])
            for key in names(args[1:]):
                m.items.pop(key, None)
            return None
        raise ExtractError(name)

    def datasource_schema(self, rs: GoMap) -> GoMap:
        out = GoMap(rs.elem)
        for k, t in rs.items.items():
            v = t.get(self)
            if not isinstance(v, Struct):
                raise ExtractError(f"datasource schema: {k} is not a schema")
            dv = Struct(v.type)
            dv.set("Computed", True)
            dv.set("Required", False)
            typ = v.get(self, "Type")
            dv.set("Type", typ)
            elem = v.get(self, "Elem")
            if isinstance(typ, Opaque) and typ.what.endswith((".TypeSet", ".TypeList")) \
                    and isinstance(elem, Struct) and elem.type[1] == "Resource":
                r = Struct(elem.type)
                r.set("Schema", self.datasource_schema(elem.get(self, "Schema")))
                dv.set("Elem", r)
            else:
                dv.set("Elem", elem)
            out.items[k] = thunk_value(dv)
        return out


# --- conversion to the committed form ---------------------------------------------------------------------------
def _flag(ev: Evaluator, s: Struct, name: str) -> bool:
    v = s.get(ev, name, False)
    if not isinstance(v, bool):
        raise ExtractError(f"{name} is not a constant: {v}")
    return v


def sdk_block(ev: Evaluator, m: Any, top: str | None = None, timeouts: Any = None) -> dict[str, Any]:
    if not isinstance(m, GoMap):
        raise ExtractError(f"not a schema map: {m}")
    arguments: dict[str, str] = {}
    blocks: dict[str, Any] = {}
    deprecated: dict[str, str] = {}
    for name in sorted(m.items):
        s = m.items[name].get(ev)
        if not isinstance(s, Struct) or s.type[1] != "Schema":
            raise ExtractError(f"{name}: not a *schema.Schema: {s}")
        required, optional = _flag(ev, s, "Required"), _flag(ev, s, "Optional")
        if not (required or optional):
            continue  # computed only: not an argument
        message = s.get(ev, "Deprecated")
        if message is not None:
            deprecated[name] = message if isinstance(message, str) else "deprecated"
        elem = s.get(ev, "Elem")
        mode = s.get(ev, "ConfigMode")
        if isinstance(elem, Struct) and elem.type[1] == "Resource" and not (
                isinstance(mode, Opaque) and mode.what.endswith("SchemaConfigModeAttr")):
            blocks[name] = {"required": required, **sdk_block(ev, elem.get(ev, "Schema"))}
        else:
            arguments[name] = "required" if required else "optional"
    if top is not None and "id" not in m.items:
        arguments["id"] = "optional"  # helper/schema's CoreConfigSchema adds it
    if isinstance(timeouts, Struct) and "timeouts" not in m.items:
        names = [k.lower() for k in ("Create", "Read", "Update", "Delete", "Default") if k in timeouts.fields
                 and timeouts.get(ev, k) is not None]
        blocks["timeouts"] = {"required": False, "arguments": {n: "optional" for n in names}, "blocks": {}}
    out = {"arguments": dict(sorted(arguments.items())), "blocks": dict(sorted(blocks.items()))}
    if deprecated:
        out["deprecated"] = deprecated
    return out


def fw_block(ev: Evaluator, s: Struct) -> dict[str, Any]:
    arguments: dict[str, str] = {}
    blocks: dict[str, Any] = {}
    deprecated: dict[str, str] = {}
    attrs = s.get(ev, "Attributes")
    if isinstance(attrs, GoMap):
        for name, t in attrs.items.items():
            a = t.get(ev)
            if not isinstance(a, Struct):
                raise ExtractError(f"framework attribute {name}: {a}")
            if _flag(ev, a, "Required"):
                arguments[name] = "required"
            elif _flag(ev, a, "Optional"):
                arguments[name] = "optional"
            else:
                continue
            message = a.get(ev, "DeprecationMessage")
            if message is not None:
                deprecated[name] = message if isinstance(message, str) else "deprecated"
    bl = s.get(ev, "Blocks")
    if isinstance(bl, GoMap):
        for name, t in bl.items.items():
            b = t.get(ev)
            if not isinstance(b, Struct):
                raise ExtractError(f"framework block {name}: {b}")
            inner = b if b.type[1] == "SingleNestedBlock" else b.get(ev, "NestedObject")
            if not isinstance(inner, Struct):
                raise ExtractError(f"framework block {name}: no nested object")
            validators = b.fields.get("Validators")
            required = validators is not None and bool(
                {"IsRequired", "SizeAtLeast"} & set(called(validators.node)))
            blocks[name] = {"required": required, **fw_block(ev, inner)}
            message = b.get(ev, "DeprecationMessage")
            if message is not None:
                deprecated[name] = message if isinstance(message, str) else "deprecated"
    out = {"arguments": dict(sorted(arguments.items())), "blocks": dict(sorted(blocks.items()))}
    if deprecated:
        out["deprecated"] = dict(sorted(deprecated.items()))
    return out


# --- registrations ----------------------------------------------------------------------------------------------
def registrations(src: Source, ev: Evaluator, want: set[str]) -> dict[str, dict[str, Any]]:
    """name -> {"resource": (ctx, expr-node, "sdk"|"fw"), "data": ...} for the wanted names."""
    found: dict[str, dict[str, Any]] = {n: {} for n in want}
    legacy = "google/provider/provider_mmv1_resources.go"
    if src.git("ls-tree", src.commit, legacy).strip():
        f = src.file(legacy)
        for var, decl in f.decls.items():
            if decl.kind != "var" or not var.endswith(("Resources", "Datasources")):
                continue
            lit = Parser(f.toks, decl.start).parse_expr(True)
            if lit.kind != "composite":
                continue
            kind = "data" if var.endswith("Datasources") else "resource"
            for key, value in lit.b:
                name = go_string_node(key)
                if name in found:
                    found[name].setdefault(kind, []).append((Ctx(f, {}), value, "sdk"))
    names = "|".join(re.escape(n) for n in sorted(want)) if len(want) <= 100 else r"google_\w+"
    for path in src.grep(rf'Name:\s+"({names})",', ":(glob)google/services/**/*.go"):
        f = src.file(path)
        toks = f.toks
        for k in range(len(toks) - 3):
            if toks[k].text == "registry" and toks[k + 1].text == "." and toks[k + 3].text == "{":
                what = toks[k + 2].text
                if what not in ("Schema", "FrameworkResource", "FrameworkDataSource"):
                    continue
                lit = Parser(toks, k + 3).parse_composite(Node("sel", Node("ident", "registry"), what))
                fields = {key.a: value for key, value in lit.b if key is not None}
                name = go_string_node(fields["Name"])
                if name not in found:
                    continue
                ctx = Ctx(f, {})
                if what == "Schema":
                    typ = fields["Type"].b
                    if typ in ("SchemaTypeResource", "SchemaTypeIAMResource"):
                        found[name].setdefault("resource", []).append((ctx, fields["Schema"], "sdk"))
                    elif typ in ("SchemaTypeDataSource", "SchemaTypeIAMDataSource"):
                        found[name].setdefault("data", []).append((ctx, fields["Schema"], "sdk"))
                else:
                    kind = "resource" if what == "FrameworkResource" else "data"
                    found[name].setdefault(kind, []).append((ctx, fields["Func"], "fw"))
    return found


def called(node: Any) -> list[str]:
    """Names of the functions called anywhere in an expression."""
    out: list[str] = []
    if isinstance(node, Node):
        if node.kind == "call":
            out.append(node.a.b if node.a.kind == "sel" else str(node.a.a))
        for part in (node.a, node.b, node.c):
            for sub in part if isinstance(part, list) else [part]:
                for x in sub if isinstance(sub, tuple) else [sub]:
                    out += called(x)
    return out


def go_string_node(node: Node) -> str | None:
    return node.a if node is not None and node.kind == "lit" and node.b == "string" else None


def framework_schema(ev: Evaluator, ctx: Ctx, func: Node) -> Struct:
    """The schema.Schema a plugin-framework resource's Schema method assigns to resp.Schema."""
    decl = ev.lookup(ctx.file.package_dir, func.a)
    if decl is None:
        raise ExtractError(f"no function {func.a}")
    _, body, _ = _body(decl)
    ret = next(s for s in body if s.kind == "return").a[0]
    if ret.kind != "composite":
        raise ExtractError(f"{func.a} does not return a composite literal")
    receiver = ret.a.a if ret.a.kind == "ident" else None
    method = ev.lookup_method(ctx.file.package_dir, receiver, "Schema")
    params, stmts, _ = _body(method)
    resp = params[-1]
    hits = [s for s in stmts if s.kind == "assign" and s.a[0].kind == "sel" and s.a[0].b == "Schema"
            and s.a[0].a.kind == "ident" and s.a[0].a.a == resp]
    if len(hits) != 1 or len(stmts) != 1:
        raise ExtractError(f"{receiver}.Schema is not a single `{resp}.Schema = ...`")
    value = ev.eval(hits[0].b[0], Ctx(method.file, {}))
    if not isinstance(value, Struct) or value.type[0] not in FW_SCHEMA:
        raise ExtractError(f"{receiver}.Schema: not a framework schema")
    return value


def extract(git_dir: str, tag: str, types: dict[str, set[str]], read: str) -> dict[str, Any]:
    src = Source(git_dir, tag)
    ev = Evaluator(src)
    want = set(types["resource"]) | set(types["data"])
    regs = registrations(src, ev, want)
    out: dict[str, Any] = {"resources": {}, "data_sources": {}}
    for kind, table in (("resource", "resources"), ("data", "data_sources")):
        for name in sorted(types[kind]):
            entries = regs[name].get(kind, [])
            if len(entries) != 1:
                raise ExtractError(f"{kind} {name}: {len(entries)} registrations at {tag}")
            ctx, expr, flavour = entries[0]
            if flavour == "sdk":
                resource = ev.eval(expr, ctx)
                if not isinstance(resource, Struct) or resource.type != (SDK_SCHEMA, "Resource"):
                    raise ExtractError(f"{kind} {name}: not a *schema.Resource: {resource}")
                timeouts = resource.get(ev, "Timeouts")
                out[table][name] = sdk_block(ev, resource.get(ev, "Schema"), top=name, timeouts=timeouts)
            else:
                out[table][name] = fw_block(ev, framework_schema(ev, ctx, expr))
    version = tag.lstrip("v")
    return {
        "provider": "registry.terraform.io/hashicorp/google",
        "version": version,
        "source": UPSTREAM,
        "tag": tag,
        "commit": src.commit,
        "commit_date": src.date,
        "read": read,
        "how": "python -m tests.infra.provider_schema_extract <clone of the source> " + tag
               + ": the Go schema declarations at the tag, evaluated (tests/infra/provider_schema_extract.py)",
        "resources": out["resources"],
        "data_sources": out["data_sources"],
    }


def infra_types() -> dict[str, set[str]]:
    """The google_* resource and data source types declared under infra/."""
    types: dict[str, set[str]] = {"resource": set(), "data": set()}
    for tf in INFRA.rglob("*.tf"):
        if ".terraform" in tf.parts:
            continue
        for kind, name in re.findall(r'^(resource|data)\s+"(google_\w+)"', tf.read_text(), re.M):
            types[kind].add(name)
    return types


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.infra.provider_schema_extract",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("git_dir")
    ap.add_argument("tag")
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--read", default=_dt.date.today().isoformat(), help="the date the source was read")
    ap.add_argument("--resource", action="append", default=[], help="a resource type (default: infra/'s)")
    ap.add_argument("--data", action="append", default=[], help="a data source type (default: infra/'s)")
    args = ap.parse_args(argv)
    types = infra_types() if not (args.resource or args.data) else {"resource": set(args.resource),
                                                                     "data": set(args.data)}
    try:
        data = extract(args.git_dir, args.tag, types, args.read)
    except ExtractError as e:
        print(f"extraction failed: {e}", file=sys.stderr)
        return 1
    out = args.output or DATA / f"google-provider-{data['version']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{out}: {len(data['resources'])} resources, {len(data['data_sources'])} data sources "
          f"(hashicorp/google {data['version']}, {data['commit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
