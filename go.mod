module github.com/zxfs/zx

go 1.26
