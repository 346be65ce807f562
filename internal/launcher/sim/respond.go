package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

var (
	sayRe   = regexp.MustCompile(`(?i)\bsay\s+['"‘“]([^'"’”]+)['"’”]`)
	mathRe  = regexp.MustCompile(`(?i)what is\s+(-?\d+)\s*([-+*x×/])\s*(-?\d+)`)
	countRe = regexp.MustCompile(`(?i)count from (\d+) to (\d+)`)
	aboutRe = regexp.MustCompile(`(?i)sentences? about (?:the )?([\p{L} ]+?)[.?!]*$`)
)

// respond is the simulated model: a few rules that answer the smoke probes as
// a healthy model would, with the reasoning a thinking model would show.
func respond(prompt string) (answer, reasoning string) {
	if m := countRe.FindStringSubmatch(prompt); m != nil {
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		if to-from > 2000 {
			to = from + 2000
		}
		var nums []string
		for i := from; i <= to; i++ {
			nums = append(nums, strconv.Itoa(i))
		}
		return strings.Join(nums, ", "), fmt.Sprintf("The user wants the numbers from %d to %d, separated by commas.", from, to)
	}
	if m := mathRe.FindStringSubmatch(prompt); m != nil {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[3])
		var r float64
		switch m[2] {
		case "+":
			r = float64(a + b)
		case "-":
			r = float64(a - b)
		case "/":
			if b == 0 {
				return "Division by zero is undefined.", "The user divides by zero."
			}
			r = float64(a) / float64(b)
		default:
			r = float64(a * b)
		}
		rs := strconv.FormatFloat(r, 'f', -1, 64)
		reasoning = fmt.Sprintf("The user asks for %d%s%d. Working it out: %d %s %d gives %s.", a, m[2], b, a, m[2], b, rs)
		if strings.Contains(strings.ToLower(prompt), "number only") {
			return rs, reasoning
		}
		return fmt.Sprintf("%d %s %d = **%s**", a, m[2], b, rs), reasoning
	}
	if m := sayRe.FindStringSubmatch(prompt); m != nil {
		return m[1], fmt.Sprintf("The user wants me to say %q and nothing else.", m[1])
	}
	if m := aboutRe.FindStringSubmatch(prompt); m != nil {
		return fmt.Sprintf("The %s is wide and full of life. People have written about the %s for as long as they have written at all.", m[1], m[1]),
			fmt.Sprintf("The user wants a few sentences about the %s.", m[1])
	}
	return "I am a simulated model served by bmx sim-server. I can repeat a phrase, add two numbers and count.",
		"The request does not match anything the simulation knows, so I describe myself."
}

// saladPieces are BPE-like fragments from several scripts; glued at random
// they make the multilingual salad a model with broken weights produces.
var saladPieces = []string{
	"склад", "ระ", "并被", "渝", "Keg", "治愈", "cevap", "Hans", "Female", "当然是", "nỗ", "ölç", "απο",
	"데이", "ниц", "เป็น", "zł", "quê", "ование", "ที่", "的に", "ungs", "тер", "ção", "بال", "लिए",
}

// salad returns n words of token salad, the same for the same prompt.
func salad(prompt string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	rng := rand.New(rand.NewPCG(h.Sum64(), 42))
	words := make([]string, n)
	for i := range words {
		var w strings.Builder
		for range 1 + rng.IntN(3) {
			w.WriteString(saladPieces[rng.IntN(len(saladPieces))])
		}
		words[i] = w.String()
	}
	return strings.Join(words, " ")
}

// tokens approximates a tokenizer: about four tokens for three words.
func tokens(s string) int {
	n := len(strings.Fields(s))
	return (n*4 + 2) / 3
}

// truncateTokens cuts s to at most n tokens' worth of words.
func truncateTokens(s string, n int) string {
	words := strings.Fields(s)
	keep := n * 3 / 4
	if keep >= len(words) {
		return s
	}
	return strings.Join(words[:keep], " ")
}
