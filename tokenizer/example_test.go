package tokenizer

import (
	"fmt"
	"log"
)

func ExampleTiny() {
	tok := Tiny()
	ids := tok.Encode("<|im_start|>user\nGuess the number.<|im_end|>")
	fmt.Println(len(ids) < 10, ids[0] == mustHave(tok.TokenID("<|im_start|>")), tok.EOS() == ids[len(ids)-1])
	fmt.Printf("%q\n", tok.Decode(ids, false))
	fmt.Printf("%q\n", tok.Decode(ids, true))
	// Output:
	// true true true
	// "<|im_start|>user\nGuess the number.<|im_end|>"
	// "user\nGuess the number."
}

func mustHave(id int32, ok bool) int32 {
	if !ok {
		log.Fatal("token missing")
	}
	return id
}

func ExampleChat_ToolSuffixIDs() {
	chat, err := NewChat(Tiny())
	if err != nil {
		log.Fatal(err)
	}
	suffix, err := chat.ToolSuffixIDs([]Message{
		{Role: "tool", Name: "guess", Content: "higher"},
		{Role: "tool", Name: "guess", Content: "lower"},
	}, RenderOptions{EnableThinking: ThinkingOff})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", chat.Tokenizer().Decode(suffix, false))
	// Output:
	// "\n<|im_start|>user\n<tool_response>\nhigher\n</tool_response>\n<tool_response>\nlower\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}
