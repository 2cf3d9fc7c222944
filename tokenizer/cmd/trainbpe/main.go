// Command trainbpe regenerates the tiny tokenizer (tokenizer.TrainTiny) and
// writes its tokenizer.json:
//
//	go run ./tokenizer/cmd/trainbpe -out tokenizer/tiny/tokenizer.json
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/x/tokenizer"
)

func main() {
	out := flag.String("out", "", "where to write tokenizer.json")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	if out == "" {
		return errors.New("trainbpe: -out is required")
	}
	data, err := tokenizer.TrainTiny()
	if err != nil {
		return fmt.Errorf("trainbpe: %w", err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("trainbpe: %w", err)
	}
	fmt.Printf("trainbpe: wrote %s (%d bytes)\n", out, len(data))
	return nil
}
