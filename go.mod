module github.com/x

go 1.26.8

require (
	github.com/gorilla/websocket v1.5.3
	github.com/stretchr/testify v1.12.1
	github.com/sugarme/tokenizer v0.3.0
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v2 v2.15.0 // indirect
	github.com/sugarme/regexpset v0.0.0-20200920021344-4d4ec8eaf93c // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
