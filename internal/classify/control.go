package classify

import (
	"fmt"
	"strings"
	"unicode"
)

// specialTokenRe matches the control tokens of chat templates and
// tokenizers, of every model family bmx has met: ChatML and Llama 3
// (<|im_start|>, <|eot_id|>, <|start_header_id|>), Phi and GLM (<|user|>,
// <|end|>), GPT-2/Qwen (<|endoftext|>), DeepSeek (<｜end▁of▁sentence｜>),
// Gemma (<start_of_turn>, <eos>), Llama 2 and Mistral ([INST], <<SYS>>,
// [TOOL_CALLS], </s>), EXAONE ([|assistant|]), ChatGLM ([gMASK], <sop>),
// Baichuan (<reserved_106>), Gemma's and T5's spare tokens (<unused0>,
// <extra_id_0>), BERT ([SEP]), byte fallback (<0x0A>), and ChatML's
// markers with their bars lost (<im_end>).
var specialTokenRe = lazyRE(`<\|[^|<>\s]{1,48}\|>|<0x[0-9A-Fa-f]{2}>|<｜[^｜<>\s]{1,48}｜>` +
	`|<(?:unk|pad|mask|eos|bos|s|/s|sop|eop|start_of_turn|end_of_turn|start_of_image|end_of_image|im_start|im_end|eot_id|endoftext` +
	`|reserved_\d{1,4}|unused\d{1,4}|extra_id_\d{1,3})>` +
	`|\[(?:PAD|UNK|CLS|SEP|MASK|gMASK|sMASK|/?INST|/?SYSTEM_PROMPT|TOOL_CALLS|/?AVAILABLE_TOOLS|/?TOOL_RESULTS)\]` +
	`|<</?SYS>>|\[\|[a-z_]{2,24}\|\]`)

// roleLeakRe is a turn whose markers the server stripped but whose role
// name it kept: "Paris.assistant" glued to the end of a sentence, or a
// line that is only "assistant" (ChatML and Llama 3 without their special
// tokens).
var roleLeakRe = lazyRE(`(?m)[.!?。！？](?:assistant|user)\s*$|^\s*assistant\s*$`)

// templateCue finds a prompt that talks about chat templates, tokens,
// formats or the model families that have them: an answer about them
// names their markers.
var templateCue = newCue(`(?i)template|(?:special|control|stop|eos|bos|end) tokens?|tokeni[sz]er|chatml|turn marker|\beos\b|\bbos\b` +
	`|(?:prompt|chat|message|conversation) format|\btags?\b|transcript|dialog|<\|` +
	`|llama|mistral|gemma|qwen|deepseek|glm|exaone|baichuan|\bphi\b|harmony|gpt-oss`)

// strikeRe is HTML's strike-through, <s>text</s>, which is not Llama's
// sentence tokens.
var strikeRe = lazyRE(`<s>[^\s<][^<\n]{0,200}</s>`)

// specialTokens finds chat-template and tokenizer control tokens in the
// content, outside code: the template, the stop tokens or the detokenizer
// are broken, or the logits are. One is enough, an end-of-turn marker
// after a right answer too: a server that works never shows them. Not
// counted: tokens the prompt itself shows, and any in an answer to a
// prompt about templates.
func specialTokens(t string, c textContext) string {
	if templateCue.MatchString(c.prompt) {
		return ""
	}
	prose := fenceRe.ReplaceAllString(t, "\n")
	prose = codeSpanRe.ReplaceAllString(prose, " ")
	prose = strikeRe.ReplaceAllString(prose, " ")
	var found []string
	for _, tok := range specialTokenRe.FindAllString(prose, -1) {
		if !strings.Contains(c.prompt, tok) {
			found = append(found, tok)
		}
	}
	for _, role := range roleLeakRe.FindAllString(prose, -1) {
		found = append(found, strings.TrimSpace(role))
	}
	if len(found) == 0 {
		return ""
	}
	all := clipRunes(strings.Join(found, " "), 60)
	rest := specialTokenRe.ReplaceAllString(prose, "")
	if !strings.ContainsFunc(rest, unicode.IsLetter) {
		return fmt.Sprintf("special-token text instead of an answer (%s)", all)
	}
	return fmt.Sprintf("%d chat-template or special token(s) in the text (%s): the template, the stop tokens or the logits are broken", len(found), all)
}
