package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The tiny tokenizer's training text is generated here, deterministically
// (a fixed PCG seed), so `go generate` reproduces tiny/tokenizer.json byte
// for byte. It covers what the project's small models see: chat turns in
// Qwen3's template, JSON tool calls and responses, word and number guessing
// games, plain prose and digits.

// corpusWords are common English words.
func corpusWords() []string {
	return strings.Fields(`the of and to a in is it you that he was for on are with as his they be at one have
this from or had by hot word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing see him two has
look more day could go come did number sound no most people my over know water than call first who may down side
been now find any new work part take get place made live where after back little only round man year came show
every good me give our under name very through just form sentence great think say help low line differ turn cause
much mean before move right boy old too same tell does set three want air well also play small end put home read
hand port large spell add even land here must big high such follow act why ask men change went light kind off need
house picture try us again animal point mother world near build self earth father head stand own page should country
found answer school grow study still learn plant cover food sun four between state keep eye never last let thought
city tree cross farm hard start might story saw far sea draw left late run while press close night real life few
north open seem together next white children begin got walk example ease paper group always music those both mark
often letter until mile river car feet care second book carry took science eat room friend began idea fish mountain
stop once base hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red
list though feel talk bird soon body dog family direct pose leave song measure door product black short numeral
class wind question happen complete ship area half rock order fire south problem piece told knew pass since top
whole king space heard best hour better true during hundred five remember step early hold west ground interest reach
fast verb sing listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power town fine certain
fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive
stood contain front teach week final gave green quick develop ocean warm free minute strong special mind behind
clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface deep
moon island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate miss brought heat snow tire bring yes distant fill east paint language among grand ball yet
wave drop heart present heavy dance engine position arm wide sail material size vary settle speak weight general ice
matter circle pair include divide syllable felt perhaps pick sudden count square reason length represent art
subject region energy hunt probable bed brother egg ride cell believe fraction forest sit race window store summer
train sleep prove lone exercise wall catch mount wish sky board joy winter sat written wild instrument kept glass
grass cow job edge sign visit past soft fun bright gas weather month million bear finish happy hope flower clothe
strange gone jump baby eight village meet root buy raise solve metal whether push seven paragraph third shall held
hair describe cook floor either result burn hill safe cat century consider type law bit coast copy phrase silent
tall sand soil roll temperature finger industry value fight lie beat excite natural view sense ear else quite broke
case middle kill son lake moment scale loud spring observe child straight consonant nation dictionary milk speed
method organ pay age section dress cloud surprise quiet stone tiny climb cool design poor lot experiment bottom key
iron single stick flat twenty skin smile crease hole trade melody trip office receive row mouth exact symbol die
least trouble shout except wrote seed tone join suggest clean break lady yard rise bad blow oil blood touch grew
cent mix team wire cost lost brown wear garden equal sent choose fell fit flow fair bank collect save control
decimal gentle woman captain practice separate difficult doctor please protect noon whose locate ring character
insect caught period indicate radio spoke atom human history effect electric expect crop modern element hit student
corner party supply bone rail imagine provide agree thus capital chair danger fruit rich thick soldier process
operate guess necessary sharp wing create neighbor wash bat rather crowd corn compare poem string bell depend meat
rub tube famous dollar stream fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh
search send yellow gun allow print dead spot desert suit current lift rose continue block chart hat sell success
company subtract event particular deal swim term opposite wife shoe shoulder spread arrange camp invent cotton born
determine quart nine truck noise level chance gather shop stretch throw shine property column molecule select wrong
gray repeat require broad prepare salt nose plural anger claim continent oxygen sugar death pretty skill women
season solution magnet silver thank branch match suffix especially fig afraid huge sister steel discuss forward
similar guide experience score apple bought led pitch coat mass card band rope slip win dream evening condition
feed tool total basic smell valley nor double seat arrive master track parent shore division sheet substance favor
connect post spend chord fat glad original share station dad bread charge proper bar offer segment slave duck
instant market degree populate chick dear enemy reply drink occur support speech nature range steam motion path
liquid log meant quotient teeth shell neck`)
}

// corpusFiveLetter are words for the word-guessing game.
func corpusFiveLetter() []string {
	return strings.Fields(`apple grape lemon mango peach melon berry olive guava plums crane slate
trace crate house mouse horse water light night right sight might fight eight world words sword board chair table
plant giant stone phone round sound found ghost toast roast beach peace dance lance brave grave shade blade spade
train brain grain chain plain smart start heart earth north south storm forms tiger zebra camel eagle robin quail
bread cream honey sugar spice salty sweet sharp flame flash brush crush frost solid vivid pixel index query token`)
}

func corpusNames() []string {
	return strings.Fields(`Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent Victor Walter`)
}

func corpusFruits() []string {
	return strings.Fields(`apple banana cherry grape lemon mango orange peach pear plum kiwi melon papaya lime fig date`)
}

// corpusCode are short code snippets.
func corpusCode() []string {
	return []string{
		"func main() {\n\tfmt.Println(\"hello\")\n}\n",
		"def solve(x):\n    return x * 2 + 1\n",
		"for i := 0; i < n; i++ {\n\tsum += a[i]\n}\n",
		"if err != nil {\n\treturn fmt.Errorf(\"load: %w\", err)\n}\n",
		"x = [i ** 2 for i in range(10)]\nprint(sum(x))\n",
		"SELECT name, score FROM players WHERE score > 10 ORDER BY score DESC;\n",
		"const total = items.reduce((a, b) => a + b, 0);\n",
	}
}

// corpusTools are the tool schemas used in generated conversations.
func corpusTools() []json.RawMessage {
	return []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "guess", "description": "Submit a guess for the secret word.", "parameters": {"type": "object", "properties": {"guess": {"type": "string", "description": "The guessed word."}}, "required": ["guess"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "guess_number", "description": "Guess the secret number.", "parameters": {"type": "object", "properties": {"number": {"type": "integer", "description": "The guessed number."}}, "required": ["number"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "move", "description": "Move the player one step.", "parameters": {"type": "object", "properties": {"direction": {"type": "string", "enum": ["north", "south", "east", "west"], "description": "Direction to move."}}, "required": ["direction"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}`),
	}
}

// tinyCorpus generates the tiny tokenizer's training text.
func tinyCorpus() []string {
	r := rand.New(rand.NewPCG(20261201, 4096))
	words, five, code := corpusWords(), corpusFiveLetter(), corpusCode()
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	sentence := func() string {
		n := 4 + r.IntN(12)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = pick(words)
		}
		ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
		end := pick([]string{".", ".", ".", "?", "!", ","})
		return strings.Join(ws, " ") + end
	}
	var docs []string
	// Prose.
	for range 3000 {
		var b strings.Builder
		for k := range 1 + r.IntN(4) {
			if k > 0 {
				b.WriteString(pick([]string{" ", " ", "\n", "\n\n"}))
			}
			b.WriteString(sentence())
		}
		docs = append(docs, b.String())
	}
	// Numbers and arithmetic.
	for range 1500 {
		a, b := r.IntN(1000), r.IntN(1000)
		docs = append(docs, fmt.Sprintf("%d + %d = %d. %d * %d = %d; %d - %d = %d. Score: %d/%d, %0.2f%%",
			a, b, a+b, a%50, b%50, (a%50)*(b%50), a, b, a-b, r.IntN(10), 10, r.Float64()*100))
	}
	docs = append(docs, code...)
	for range 300 {
		docs = append(docs, pick(code))
	}
	// Games as plain text.
	for range 1500 {
		secret, guess := pick(five), pick(five)
		docs = append(docs, fmt.Sprintf("Guess %d: %s\nFeedback: %s\nYou have %d guesses left.", 1+r.IntN(6), guess, wordleFeedback(secret, guess), r.IntN(6)))
		n, g := r.IntN(100)+1, r.IntN(100)+1
		hint := "correct"
		if g < n {
			hint = "higher"
		} else if g > n {
			hint = "lower"
		}
		docs = append(docs, fmt.Sprintf("I guess %d. The secret number is %s than %d.", g, hint, g))
	}
	// Chat conversations with tools, rendered with the template.
	tools := corpusTools()
	for range 2500 {
		msgs := corpusConversation(r, pick, sentence)
		opts := RenderOptions{Tools: tools[:1+r.IntN(len(tools))], KeepAllReasoning: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			opts.Tools = nil
		}
		b, err := appendRender(nil, msgs, opts)
		if err != nil {
			panic("tiny corpus: " + err.Error()) // generated input, a bug if it fails
		}
		docs = append(docs, string(b))
	}
	return docs
}

func corpusConversation(r *rand.Rand, pick func([]string) string, sentence func() string) []Message {
	names, fruits, words := corpusNames(), corpusFruits(), corpusWords()
	msgs := []Message{}
	if r.IntN(2) == 0 {
		msgs = append(msgs, Message{Role: "system", Content: pick([]string{
			"You are a helpful assistant.", "You are playing a word guessing game.",
			"Answer briefly.", "You are " + pick(names) + ", a careful assistant."})})
	}
	msgs = append(msgs, Message{Role: "user", Content: pick([]string{
		"Guess the secret word. It is a fruit.", "Guess the five-letter word.",
		"Guess a number between 1 and 100.", "What is " + fmt.Sprint(r.IntN(100)) + " + " + fmt.Sprint(r.IntN(100)) + "?",
		"Find the exit of the maze.", sentence()})})
	for turn := range 1 + r.IntN(4) {
		var call ToolCall
		switch r.IntN(4) {
		case 0:
			call = ToolCall{Name: "guess", Arguments: json.RawMessage(fmt.Sprintf(`{"guess": %q}`, pick(fruits)))}
		case 1:
			call = ToolCall{Name: "guess_number", Arguments: json.RawMessage(fmt.Sprintf(`{"number": %d}`, r.IntN(100)+1))}
		case 2:
			call = ToolCall{Name: "move", Arguments: json.RawMessage(fmt.Sprintf(`{"direction": %q}`, pick([]string{"north", "south", "east", "west"})))}
		default:
			call = ToolCall{Name: "calculator", Arguments: json.RawMessage(fmt.Sprintf(`{"expression": "%d * %d"}`, r.IntN(100), r.IntN(100)))}
		}
		reasoning := ""
		if r.IntN(2) == 0 {
			reasoning = sentence() + " " + sentence()
		}
		content := ""
		if r.IntN(3) == 0 {
			content = sentence()
		}
		msgs = append(msgs, Message{Role: "assistant", Content: content, ReasoningContent: reasoning, ToolCalls: []ToolCall{call}})
		result := pick([]string{
			fmt.Sprintf(`{"correct": false, "hint": "The word starts with %s."}`, strings.ToUpper(pick(fruits)[:1])),
			fmt.Sprintf("%d", r.IntN(10000)), "wrong", "correct", "higher", "lower",
			fmt.Sprintf(`{"position": [%d, %d], "blocked": %v}`, r.IntN(10), r.IntN(10), r.IntN(2) == 0),
			fmt.Sprintf(`{"error": "Tool %s not found."}`, pick(words)),
		})
		msgs = append(msgs, Message{Role: "tool", Name: call.Name, Content: result})
		if turn > 0 && r.IntN(3) == 0 {
			break
		}
	}
	msgs = append(msgs, Message{Role: "assistant", Content: "The answer is " + pick(fruits) + ".", ReasoningContent: sentence()})
	return msgs
}

// wordleFeedback marks each letter of guess: G right place, Y elsewhere in
// the secret, B absent.
func wordleFeedback(secret, guess string) string {
	out := []byte(strings.Repeat("B", len(guess)))
	for i := 0; i < len(guess) && i < len(secret); i++ {
		if guess[i] == secret[i] {
			out[i] = 'G'
		} else if strings.IndexByte(secret, guess[i]) >= 0 {
			out[i] = 'Y'
		}
	}
	return string(out)
}
