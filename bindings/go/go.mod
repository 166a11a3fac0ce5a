module github.com/kjit-dev/kjit/bindings/go

go 1.19
