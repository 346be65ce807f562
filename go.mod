module github.com/bmx-dev/bmx

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/sashabaranov/go-openai v1.43.0
	golang.org/x/sync v0.25.0
)
