"""The live run's test model: a tiny dense Qwen3, generated here, nothing downloaded.

A Hugging Face checkpoint directory that vLLM serves like the reference model's: a
``Qwen3ForCausalLM`` (transformers' ``Qwen3Config``; head_dim 64, since the CPU attention kernels
refuse 16: ../shared/FACTS.md "Real vLLM on a CPU"), a byte-level BPE tokenizer trained with
``tokenizers`` on a few sentences, and a chat template that renders tools and ``<think>`` in the
format the reference's parsers read (``--reasoning-parser qwen3``, ``--tool-call-parser
qwen3_coder``: vLLM 0.32 ``vllm/parser/qwen3.py``, the ``<think>``/``</think>``,
``<tool_call>``/``<function=...>``/``<parameter=...>`` terminals, ``<think>`` and ``<tool_call>``
matched as single token ids, so they are added tokens here, non-special so they survive
detokenization as they do in Qwen3's tokenizer).

Random weights cannot emit a tool call or close a reasoning block (FACTS), and ``cdk-llm-serving
smoke`` needs both. So the weights start random and are then fitted, in seconds, to two answers:
with tools offered, ``<think>`` reasoning then a ``get_weather`` call in the qwen3_coder format;
without, reasoning then ``391``. Prompts are rendered by this chat template from the requests
``smoke`` sends (``cdk_llm_serving.ops.smoke``), with the tools as vLLM hands them to the
template (``[tool.model_dump() for tool in request.tools]``: vLLM 0.32
``vllm/renderers/online_renderer.py``), plus variants so the answer depends on whether tools are
offered rather than on the exact prompt. Greedy decoding (``temperature: 0``) then reproduces
the answers, which the generator checks before it saves. Any other prompt gets noise.

Runs in the vLLM virtualenv (torch, transformers, tokenizers):
``.venv/vllm/bin/python -m rehearsal.live.generated_model DIR``; ``ensure_model`` does that,
once per content (the directory is named by a hash of this file).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: What ``cdk-llm-serving smoke`` sends (kept in step by ``tests/rehearsal/live``).
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOL_PROMPT = "What is the weather in Seattle right now? Use the tool."
REASONING_PROMPT = "Think step by step: what is 17 * 23? Give only the number as the final answer."

#: The fitted answers.
TOOL_ANSWER = (
    "<think>\nThe user wants the weather: call the tool.\n</think>\n\n"
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nSeattle\n</parameter>\n"
    "</function>\n</tool_call>"
)
REASONING_ANSWER = "<think>\n17 * 23 = 17 * 20 + 17 * 3 = 340 + 51 = 391.\n</think>\n\n391"
REASONING_TEXT = "17 * 23 = 17 * 20 + 17 * 3 = 340 + 51 = 391."
ANSWER_TEXT = "391"

END = "<|im_end|>"
SPECIAL = ["<|endoftext|>", "<|im_start|>", END]
#: Matched by the parsers as single token ids; not special (kept in decoded text).
MARKUP = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

#: Tools, reasoning and Qwen3's ``enable_thinking`` switch (``false``: an empty think block, the
#: answer comes as content). Written for this generator.
CHAT_TEMPLATE = """\
{%- set ns = namespace(system='') -%}
{%- if messages and messages[0].role == 'system' -%}{%- set ns.system = messages[0].content -%}{%- endif -%}
{%- if tools -%}
<|im_start|>system
{% if ns.system %}{{ ns.system }}

{% endif %}You may call these tools:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call one as <tool_call>
<function=NAME>
<parameter=ARGUMENT>
VALUE
</parameter>
</function>
</tool_call><|im_end|>
{% elif ns.system -%}
<|im_start|>system
{{ ns.system }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- elif message.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' -%}
<|im_start|>assistant
{% if message.reasoning_content %}<think>
{{ message.reasoning_content }}
</think>

{% endif %}{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}
<tool_call>
<function={{ call.function.name }}>
{% if call.function.arguments is mapping %}{% for key, value in call.function.arguments.items() %}<parameter={{ key }}>
{{ value }}
</parameter>
{% endfor %}{% endif %}</function>
</tool_call>
{%- endfor %}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif -%}
{%- endif -%}
"""

SENTENCES = [
    "The rehearsal plays the deployment without AWS.",
    "A leader and a worker serve one model together.",
    "What is the weather in Paris today? It is sunny and warm.",
    "Think step by step before you answer the question.",
    "Seattle is a city in the state of Washington.",
    "The quick brown fox jumps over the lazy dog.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 17 23 340 51 391.",
    "You may call these tools when the user asks for them.",
]

#: The model's shape: dense, head_dim 64, small enough to fit and serve in seconds.
SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "max_position_embeddings": 4096,
}
MAX_MODEL_LEN = SHAPE["max_position_embeddings"]


def content_key() -> str:
    """A hash of this file: the cached model is regenerated when the generator changes."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _tokenizer(out: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [*SENTENCES, TOOL_PROMPT, REASONING_PROMPT, TOOL_ANSWER, REASONING_ANSWER]
    corpus.append(json.dumps(TOOL))
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=None,
        eos_token=END,
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=MAX_MODEL_LEN,
    )
    tokenizer.add_tokens(MARKUP, special_tokens=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _tool_dicts(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools as vLLM hands them to the chat template (its request model's ``model_dump``);
    the plain dicts where vLLM is not importable."""
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    except Exception:  # noqa: BLE001 - any import failure: fall back to the dicts as sent
        return tools
    request = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "x"}], tools=tools
    )
    return [tool.model_dump() for tool in request.tools or []]


def _examples() -> list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]]:
    """(messages, tools, answer): the requests smoke sends, and variants."""
    other_tool = json.loads(json.dumps(TOOL))
    other_tool["function"]["description"] = "The weather now in a city"
    users_with_tools = [
        TOOL_PROMPT,
        "Weather in Seattle?",
        "Is it raining in Seattle? Use the tool.",
    ]
    users_plain = [REASONING_PROMPT, "What is 17 * 23?", "Hello, who are you?", "Say something."]
    examples: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]] = []
    for tools in ([TOOL], [other_tool]):
        for tool_list in (tools, _tool_dicts(tools)):
            for user in users_with_tools:
                examples.append(([{"role": "user", "content": user}], tool_list, TOOL_ANSWER))
    for user in users_plain:
        examples.append(([{"role": "user", "content": user}], None, REASONING_ANSWER))
        system = [{"role": "system", "content": "You are a helpful assistant."}]
        examples.append(([*system, {"role": "user", "content": user}], None, REASONING_ANSWER))
    return examples


def generate(out: Path, steps: int = 400, seed: int = 0) -> dict[str, float]:
    """Write the checkpoint to ``out``; the seconds it took (fitting, checking, saving)."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    started = time.perf_counter()
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tokenizer = _tokenizer(out)
    end_id = tokenizer.convert_tokens_to_ids(END)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        **SHAPE,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=end_id,
        pad_token_id=tokenizer.pad_token_id,
        rope_theta=10000.0,
    )
    model = Qwen3ForCausalLM(config)

    rows = []
    for messages, tools, answer in _examples():
        prompt = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer + END, add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids, answer_ids))
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (prompt_ids, answer_ids) in enumerate(rows):
        sequence = prompt_ids + answer_ids
        ids[row, : len(sequence)] = torch.tensor(sequence)
        labels[row, len(prompt_ids) : len(sequence)] = torch.tensor(answer_ids)
        mask[row, : len(sequence)] = 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    model.generation_config = GenerationConfig(
        eos_token_id=end_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
    )
    checks = _examples()[:1] + _examples()[-2:]
    loss = torch.tensor(0.0)
    for step in range(steps):
        model.train()
        optimizer.zero_grad()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        # Stop once greedy decoding gives every answer (checked from a low loss on).
        if loss.item() < 0.005 and step % 10 == 0 and _answers(model, tokenizer, checks) is None:
            break
    fitted = time.perf_counter()
    wrong = _answers(model, tokenizer, checks)
    if wrong:
        raise RuntimeError(f"the fitted model answers {wrong}")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "steps": step + 1,
        "fit_seconds": round(fitted - started, 1),
        "total_seconds": round(time.perf_counter() - started, 1),
        "final_loss": round(float(loss.item()), 5),
    }


def _answers(model: Any, tokenizer: Any, examples: Any) -> str | None:
    """``None`` when greedy decoding gives each example's answer in float32 and bfloat16 (vLLM
    may run either); otherwise the first wrong answer."""
    import torch

    model.eval()
    try:
        for messages, tools, answer in examples:
            prompt = tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=False
            )
            ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
            for dtype in (torch.float32, torch.bfloat16):
                with torch.no_grad():
                    produced = model.to(dtype).generate(ids, max_new_tokens=80, do_sample=False)
                text = tokenizer.decode(produced[0, ids.shape[1] :], skip_special_tokens=True)
                if text != answer:
                    return f"{text!r} ({dtype}), not {answer!r}"
        return None
    finally:
        model.to(torch.float32)


def ensure_model(cache: Path, python: Path) -> tuple[Path, float | None]:
    """The generated model's directory under ``cache`` (made with ``python``, the vLLM
    virtualenv's, when absent) and the seconds generating took (``None``: cached)."""
    target = cache / f"qwen3-dense-test-{content_key()}"
    if (target / "config.json").is_file():
        return target, None
    started = time.perf_counter()
    partial = target.with_name(target.name + ".partial")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = str(root)
    env["VLLM_TARGET_DEVICE"] = "cpu"
    done = subprocess.run(
        [str(python), "-m", "rehearsal.live.generated_model", str(partial)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
    )
    if done.returncode != 0:
        raise RuntimeError(f"generating the test model failed:\n{done.stdout}\n{done.stderr}")
    partial.rename(target)
    return target, time.perf_counter() - started


if __name__ == "__main__":
    print(json.dumps(generate(Path(sys.argv[1]))))
