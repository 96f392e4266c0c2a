mod tidy;
