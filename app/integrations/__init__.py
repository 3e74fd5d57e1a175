"""Adapters of the application core to other frameworks (LangChain: ``app.integrations.langchain``)."""
