"""The stdio transport on its own (wire/transport/): header lines (``framing.read_header``,
``framing.content_length``) and what ``intake.handle_body`` answers for each kind of bad message,
written through a real protocol of the server to a real frame writer (no process, no event
loop)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import frames, framing, intake, scan


def headers(data: bytes) -> list[Any]:
    stream = io.BytesIO(data)
    found = []
    while (header := framing.read_header(stream)) is not None:
        found.append(header)
    return found


def test_a_header_is_read_up_to_its_blank_line_and_stray_lines_are_skipped() -> None:
    data = b"\r\n\r\ngarbage\r\nContent-Length: 12\r\nContent-Type: x\r\n\r\n"
    assert headers(data) == [(12, None)]


def test_the_header_name_is_case_insensitive_and_spaces_around_the_value_are_allowed() -> None:
    assert headers(b"content-LENGTH :\t 7 \r\n\r\n") == [(7, None)]


def test_a_header_glued_to_a_previous_body_is_still_found() -> None:
    assert headers(b'leftover"}Content-Length: 5\r\n\r\n') == [(5, None)]


def test_a_bad_length_is_reported_with_its_value() -> None:
    assert headers(b"Content-Length: -3\r\n\r\n") == [(None, b"-3")]
    assert headers(b"Content-Length: 1e3\r\n\r\n") == [(None, b"1e3")]


def test_the_last_length_of_a_header_wins_and_input_ending_mid_header_is_the_end() -> None:
    assert headers(b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n") == [(2, None)]
    assert headers(b"Content-Length: 9\r\n") == []


def test_two_frames_headers_in_a_row() -> None:
    assert headers(b"Content-Length: 1\r\n\r\nContent-Length: 2\n\n") == [(1, None), (2, None)]


def test_a_header_line_longer_than_the_limit_is_read_in_pieces_and_skipped() -> None:
    long_line = b"X-Pad: " + b"a" * (framing._MAX_HEADER_LINE * 3) + b"\r\n"
    assert headers(long_line + b"Content-Length: 3\r\n\r\n") == [(3, None)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"0", (0, None)),
        (b"000123", (123, None)),
        (str(framing.MAX_FRAME_BYTES).encode(), (framing.MAX_FRAME_BYTES, None)),
        (b"9" * 20, (framing.MAX_FRAME_BYTES + 1, None)),
        (b"", (None, b"")),
        (b"+5", (None, b"+5")),
    ],
)
def test_content_length_bounds(value: bytes, expected: tuple[int | None, bytes | None]) -> None:
    assert framing.content_length(value) == expected


class Wire:
    """A server protocol writing to a real frame writer; ``answers()`` parses what it wrote."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.protocol = ChatHistoryServer().protocol
        self.protocol.set_writer(frames.FrameWriter(self.out))

    def handle(self, message: Any) -> Any:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return intake.handle_body(self.protocol, body)

    def answers(self) -> list[dict[str, Any]]:
        data, found = self.out.getvalue(), []
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.split(b"\r\n")[0].split(b":")[1])
            found.append(json.loads(rest[:length]))
            data = rest[length:]
        return found


def only_error(wire: Wire) -> tuple[Any, int, str, Any]:
    (answer,) = wire.answers()
    error = answer["error"]
    return answer["id"], error["code"], error["message"], error.get("data")


def test_a_body_that_is_not_json_is_a_parse_error_with_a_null_id() -> None:
    wire = Wire()
    assert wire.handle(b'{"id": 1, "method": ') is None
    msg_id, code, message, _ = only_error(wire)
    assert (msg_id, code) == (None, -32700)
    assert message.startswith("Parse error:")


def test_a_batch_is_an_invalid_request() -> None:
    wire = Wire()
    wire.handle([{"jsonrpc": "2.0", "id": 1, "method": "x"}])
    assert only_error(wire)[:2] == (None, -32600)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "1.0", "id": 4, "method": "m"}, (4, -32600, '"jsonrpc" must be "2.0"')),
        ({"jsonrpc": "2.0", "id": 4, "method": 7}, (4, -32600, '"method" must be a string')),
        ({"jsonrpc": "2.0", "id": 4, "method": "m" * 300}, (4, -32601, "Method not found")),
        ({"jsonrpc": "2.0", "id": [1], "method": "m"}, (None, -32600, '"id" must be')),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, (None, -32600, '"id" must be')),
    ],
)
def test_envelope_problems_are_answered_under_the_id_when_it_is_valid(
    message: dict[str, Any], expected: tuple[Any, int, str]
) -> None:
    wire = Wire()
    assert wire.handle(message) is None
    msg_id, code, text, _ = only_error(wire)
    assert (msg_id, code) == expected[:2]
    assert expected[2] in text


def test_a_bad_notification_is_dropped_without_an_answer() -> None:
    wire = Wire()
    assert wire.handle({"jsonrpc": "1.0", "method": "chatHistory/x"}) is None
    assert wire.handle({"jsonrpc": "2.0", "method": "m", "params": [[[[1]]]] * 1}) is None
    assert wire.answers() == []


def test_params_nested_too_deeply_name_where() -> None:
    wire = Wire()
    deep: Any = 1
    for _ in range(intake.MAX_DEPTH + 2):
        deep = [deep]
    message = {"jsonrpc": "2.0", "id": "d", "method": "chatHistory/append", "params": {"m": deep}}
    assert wire.handle(message) is None
    msg_id, code, text, data = only_error(wire)
    assert (msg_id, code, data) == ("d", -32602, {"field": "m[0][0]"})
    assert f"nested deeper than {intake.MAX_DEPTH} levels" in text


def test_brackets_inside_strings_are_not_containers() -> None:
    assert scan.containers_over(b'{"a":[[[]]]}', 3)
    assert not scan.containers_over(b'{"a":"[[[[[[[[[[[[", "b":"\\"[["}', 3)


def test_too_many_containers_is_refused_before_parsing_under_the_request_id() -> None:
    wire = Wire()
    many = b",".join([b"[]"] * (scan.MAX_CONTAINERS + 1))
    body = b'{"jsonrpc":"2.0","id":3,"method":"chatHistory/append","params":[' + many + b"]}"
    assert wire.handle(body) is None
    msg_id, code, text, data = only_error(wire)
    assert (msg_id, code, data) == (3, -32602, {"field": "params"})
    assert f"more than {scan.MAX_CONTAINERS:,} JSON objects and arrays" in text


def test_an_lsp_request_whose_params_do_not_fit_is_invalid_params_naming_the_field() -> None:
    wire = Wire()
    params = {"processId": "x", "capabilities": {}}
    message = {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": params}
    assert wire.handle(message) is None
    msg_id, code, _, data = only_error(wire)
    assert (msg_id, code) == (5, -32602)
    assert data == {"field": "processId"}


def test_after_shutdown_only_exit_is_handled() -> None:
    wire = Wire()
    wire.protocol._shutdown = True
    wire.handle({"jsonrpc": "2.0", "id": 6, "method": "chatHistory/get", "params": {}})
    assert only_error(wire)[:3] == (6, -32600, "Invalid Request: the server is shutting down")


def test_a_response_without_an_id_is_dropped_silently() -> None:
    wire = Wire()
    assert wire.handle({"jsonrpc": "2.0", "result": 1}) is None
    assert wire.answers() == []
